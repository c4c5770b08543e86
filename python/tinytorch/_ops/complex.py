"""Complex numbers: building them (complex, polar), seeing them as real pairs (view_as_real, view_as_complex,
.real, .imag) and the ops only complex numbers have (conj, angle, sgn), each forward beside its derivative.

Gradients follow PyTorch's convention: for a real loss L and z = x + iy, z.grad = dL/dx + i dL/dy (the conjugate
Wirtinger derivative, times two). A holomorphic op passes grad * conj(f'(z)) back; the arithmetic in
pointwise.py conjugates its operands for this, and a real input of a complex result takes the real part.
"""
from __future__ import annotations

import numpy as np

from .._meta import MetaArray
from .._tensor import Tensor, _view_of
from ._common import attach, needs_grad, record, sum_to, _grad_enabled
from .pointwise import _result, broadcast_error_shapes


def _xp(x):
    return np if type(x) is np.ndarray else x.__array_namespace__()


def _name(t: Tensor) -> str:
    from ._common import _short
    return _short(t.dtype)


def _float_pair(fn: str, a: Tensor, b: Tensor) -> None:
    """complex() and polar() take two real tensors of one floating dtype, as PyTorch's kernels do."""
    for t in (a, b):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): argument must be Tensor, not {type(t).__name__}")
    if not (a.dtype.is_floating_point and b.dtype.is_floating_point):
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got {_name(a)} and "
                           f"{_name(b)}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"Expected object of scalar type {_name(a)} but got scalar type {_name(b)} for second "
                           "argument")
    if a.device != b.device:
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                           f"{a.device} and {b.device}!")


def _assemble(re, im, like):
    """A complex array with real part re and imaginary part im (broadcast together)."""
    xp = _xp(like)
    try:
        shape = np.broadcast_shapes(re.shape, im.shape)
    except ValueError:
        raise broadcast_error_shapes(re.shape, im.shape) from None
    c = np.complex128 if like.dtype == np.float64 else np.complex64
    out = xp.empty(shape, c)
    if type(out) is MetaArray:
        return out
    out.real[...] = re
    out.imag[...] = im
    return out


def complex(real: Tensor, imag: Tensor) -> Tensor:
    """real + i * imag, from two real tensors of one floating dtype (float64 -> complex128, else complex64)."""
    _float_pair("complex", real, imag)
    x, y = real._data, imag._data
    out = _result(_assemble(x, y, x))
    if needs_grad(real, imag):
        sr, si = x.shape, y.shape
        rr, ri = real._requires_grad, imag._requires_grad

        def complex_backward(g):
            return (sum_to(g.real, sr) if rr else None, sum_to(g.imag, si) if ri else None)
        record("ComplexBackward0", complex_backward, out, (real, imag))
    return out


def polar(abs: Tensor, angle: Tensor) -> Tensor:
    """abs * (cos(angle) + i sin(angle)): a complex tensor from magnitudes and phases."""
    _float_pair("polar", abs, angle)
    r, th = abs._data, angle._data
    xp = _xp(r)
    out = _result(_assemble(r * xp.cos(th), r * xp.sin(th), r))
    if needs_grad(abs, angle):
        sr, st = r.shape, th.shape
        rr, rt = abs._requires_grad, angle._requires_grad

        def polar_backward(g):
            # d out/d abs = e^{i angle}, d out/d angle = i out; a real input takes Re(conj(d out) * g)
            c, s = angle.cos(), angle.sin()
            gr, gi = g.real, g.imag
            return (sum_to(gr * c + gi * s, sr) if rr else None,
                    sum_to(abs * (gi * c - gr * s), st) if rt else None)
        record("PolarBackward0", polar_backward, out, (abs, angle), (abs, angle))
    return out


def _pairs(x):
    """A complex array's (real, imaginary) pairs as a new last axis: a view for any strides, meta arrays too."""
    return x[..., None].view(np.float64 if x.dtype == np.complex128 else np.float32)


def view_as_real(a: Tensor) -> Tensor:
    """A real view of a complex tensor with a last dimension of 2 (real part, imaginary part)."""
    x = a._data
    if x.dtype.kind != "c":
        raise RuntimeError("view_as_real is only supported for complex tensors")
    out = _view_of(a, _pairs(x))
    if a._requires_grad and _grad_enabled():
        record("ViewAsRealBackward0", lambda g: view_as_complex(g.contiguous()), out, (a,))
    return out


def view_as_complex(a: Tensor) -> Tensor:
    """A complex view of a float tensor whose last dimension (size 2, stride 1) holds real and imaginary parts."""
    x = a._data
    if x.dtype not in (np.float32, np.float64):
        raise RuntimeError("view_as_complex is only supported for float and double tensors, but got a tensor of "
                           f"scalar type: {_name(a)}")
    if x.ndim == 0 or x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    item = x.itemsize
    if x.strides[-1] != item:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * item) for s, n in zip(x.strides[:-1], x.shape[:-1]) if n > 1):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    out = _view_of(a, x.view(np.complex128 if x.dtype == np.float64 else np.complex64)[..., 0])
    if a._requires_grad and _grad_enabled():
        record("ViewAsComplexBackward0", lambda g: view_as_real(g), out, (a,))
    return out


def real(a: Tensor) -> Tensor:
    """The real part: a view of a complex tensor; a real tensor is its own real part."""
    x = a._data
    if x.dtype.kind != "c":
        return a
    out = _view_of(a, _pairs(x)[..., 0])
    if a._requires_grad and _grad_enabled():
        dt = a.dtype
        record("RealBackward0", lambda g: g.to(dt), out, (a,))
    return out


def imag(a: Tensor) -> Tensor:
    """The imaginary part of a complex tensor, as a view."""
    x = a._data
    if x.dtype.kind != "c":
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    out = _view_of(a, _pairs(x)[..., 1])
    if a._requires_grad and _grad_enabled():
        record("ImagBackward0", lambda g: g * 1j, out, (a,))
    return out


def _set_part(part):
    def setter(a: Tensor, value: Tensor) -> None:
        part(a).copy_(value)
    return setter


def conj(a: Tensor) -> Tensor:
    """The complex conjugate; a real tensor is returned as it is (tinytorch conjugates eagerly, so is_conj() is
    always False and resolve_conj() has nothing to do)."""
    x = a._data
    if x.dtype.kind != "c":
        return a
    out = _result(_xp(x).conj(x))
    if needs_grad(a):
        record("ConjBackward0", lambda g: g.conj(), out, (a,))
    return out


def conj_physical(a: Tensor) -> Tensor:
    """conj() into new memory (for a real tensor too, as PyTorch's)."""
    return conj(a) if a._data.dtype.kind == "c" else a.clone()


def angle(a: Tensor) -> Tensor:
    """The argument of each element in (-pi, pi]; for real input 0 or pi (and nan for nan), gradient zero."""
    x = a._data
    xp = _xp(x)
    if x.dtype.kind == "c":
        out = _result(xp.angle(x))
    else:
        from .pointwise import float_data
        f = float_data(a)
        out = _result(xp.where(f < 0, xp.asarray(np.pi, f.dtype), xp.where(xp.isnan(f), f, 0)).astype(f.dtype))
    if needs_grad(a):
        if x.dtype.kind == "c":
            def angle_backward(g):
                # d angle = Im(dz / z): the real loss's gradient is g * i z / |z|^2, 0 at z = 0
                sq = a.real * a.real + a.imag * a.imag
                return (g * a * 1j / sq.masked_fill(sq == 0, 1)).masked_fill(sq == 0, 0)
            record("AngleBackward0", angle_backward, out, (a,), (a,))
        else:
            record("AngleBackward0", lambda g: g * 0, out, (a,))
    return out


def sgn(a: Tensor) -> Tensor:
    """z / |z| (0 at 0) for complex tensors; sign() for real ones."""
    x = a._data
    if x.dtype.kind != "c":
        return a.sign()
    xp = _xp(x)
    m = xp.abs(x)
    out = _result(xp.where(m == 0, 0, x / xp.where(m == 0, 1, m)).astype(x.dtype))
    if needs_grad(a):
        def sgn_backward(g):
            # (g - Re(g conj(s)) s) / |z|: only the part of g across the unit circle moves s
            m = a.abs()
            s = sgn(a)
            zero = m == 0
            return ((g - (g * s.conj()).real * s) / m.masked_fill(zero, 1)).masked_fill(zero, 0)
        record("SgnBackward0", sgn_backward, out, (a,), (a,))
    return out


def is_conj(a: Tensor) -> bool:
    """Whether a's conjugation is pending: never in tinytorch, which conjugates eagerly."""
    return False


def resolve_conj(a: Tensor) -> Tensor:
    """a itself: tinytorch has no lazy conjugation to materialise."""
    return a


def resolve_neg(a: Tensor) -> Tensor:
    """a itself: tinytorch has no lazy negation to materialise."""
    return a


def is_neg(a: Tensor) -> bool:
    """Whether a's negation is pending: never in tinytorch."""
    return False


attach(view_as_real=view_as_real, view_as_complex=view_as_complex, conj=conj, conj_physical=conj_physical,
       angle=angle, sgn=sgn, is_conj=is_conj, resolve_conj=resolve_conj, resolve_neg=resolve_neg, is_neg=is_neg,
       real=property(real, _set_part(real)), imag=property(imag, _set_part(imag)))

__all__ = ["complex", "polar", "view_as_real", "view_as_complex", "real", "imag", "conj", "conj_physical", "angle",
           "sgn", "is_conj", "resolve_conj", "resolve_neg", "is_neg"]
