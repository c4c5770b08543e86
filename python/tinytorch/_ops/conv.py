"""Convolutions: conv1d/2d and conv_transpose1d/2d, forward beside their derivatives.

Every conv here is written as a sum over kernel positions of one batched matrix product
W[:, :, i, j] @ shifted(x). With stride 1 the shifted input is a contiguous slice of the padded image
flattened per channel (offset i*dilation*Wp + j*dilation), so BLAS reads it in place with a row stride
and nothing is copied; outputs computed at the padded grid's right edge are cropped at the end (about
(k-1)/W extra work). With a stride the shifted window is gathered once per kernel position into a
reused buffer. A 1x1 kernel is one GEMM on the (subsampled) input. conv_transpose is conv's adjoint, so
the two share the three array routines below; 1d convs run as 2d convs of height 1.

On a CPU with AVX-512, float32 convs with groups=1 skip the column matrix: the C++ tap kernels
(csrc/kernels/conv2d.cpp) read the same shifted rows in place and keep the output tile in registers, a
strided conv's input gradient runs as one stride-1 correlation per stride phase of the input, and 3x3
stride-1 convs (forward, input and weight gradients) run as Winograd F(2x2, 3x3) (conv2d_winograd.cpp).
"""
from __future__ import annotations

import itertools
import math
import threading

import numpy as np

from .. import _C, _autocast, _threads
from .._tensor import Tensor, _wrap
from ._common import _grad_enabled, needs_grad, record
from . import _cpu
from .linalg import _matmul


def _xp(a):
    if type(a) is np.ndarray:
        return np
    from .._device import cupy
    return cupy()


def _pair(v, n: int, name: str = "") -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) == 1 and n > 1:
            return tuple(int(v[0]) for _ in range(n))
        if len(v) != n:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match "
                               f"the convolution dimensions, but got {name}={list(v)}")
        return tuple(int(e) for e in v)
    return (int(v),) * n


# ------------------------------------------------------------------ array routines (2d, NCHW)


def _pad_array(x, pads):
    """Zero-pad the last two dims by pads = (top, bottom, left, right) (negative values crop)."""
    t, b, l, r = pads
    if t == b == l == r == 0:
        return x
    xp = _xp(x)
    N, C, H, W = x.shape
    if xp is np and min(pads) >= 0 and x.dtype in (np.float32, np.float64) and x.flags.c_contiguous:
        # One pass in C++: the padded image is the single "stride phase" of stride 1 (no calloc + copy).
        out = np.empty((1, 1, N, C, H + t + b, W + l + r), x.dtype)
        _C._cpu.conv2d_phases(x, out, t, l, False, _threads.count)
        return out[0, 0]
    out = xp.zeros((N, C, H + t + b, W + l + r), x.dtype)
    out[:, :, max(t, 0):max(t, 0) + H - max(-t, 0) - max(-b, 0), max(l, 0):max(l, 0) + W - max(-l, 0) - max(-r, 0)] = \
        x[:, :, max(-t, 0):H - max(-b, 0), max(-l, 0):W - max(-r, 0)]
    return out


def _crop(x, pads):
    t, b, l, r = pads
    H, W = x.shape[2], x.shape[3]
    return x[:, :, t:H - b, l:W - r]


def _out_size(n: int, k: int, s: int, d: int) -> int:
    return (n - d * (k - 1) - 1) // s + 1


_local = threading.local()


def _scratch(shape: tuple, dtype, like):
    """A reused per-thread host buffer for the column matrix (hundreds of MB at ResNet sizes): allocating
    and faulting it in on every call costs as much as filling it. CuPy arrays come from CuPy's pool."""
    xp = _xp(like)
    if xp is not np:
        return xp.empty(shape, dtype)
    n = math.prod(shape) * np.dtype(dtype).itemsize
    buf = getattr(_local, "buf", None)
    if buf is None or buf.nbytes < n:
        buf = None
        _local.buf = buf = np.empty(max(n, 1), np.uint8)
    return buf[:n].view(dtype).reshape(shape)


def _copy_all(pairs) -> None:
    """dst[...] = src for each pair: NumPy arrays by the strided copy on the intra-op pool (one core's copy
    bandwidth is what the column matrix is bound by). CuPy copies stay on the stream."""
    for dst, src in pairs:
        if _cpu.copy(src, dst) is None:
            dst[...] = src


def _contiguous(a):
    """A C-contiguous copy of a (strided) view, made on the intra-op pool for NumPy arrays."""
    r = _cpu.copy(a) if type(a) is np.ndarray and not a.flags.c_contiguous else None
    return _xp(a).ascontiguousarray(a) if r is None else r


def _phase_shape(Hp: int, Wp: int, s) -> tuple:
    return -(-Hp // s[0]), -(-Wp // s[1])


def _phases(xp_, s, pads=(0, 0, 0, 0)):
    """Split the input, zero-padded by pads = (top, bottom, left, right), into its s0*s1 stride phases
    (s0, s1, N, C, Hq, Wq): phase (a, b) holds padded rows a, a+s0, ... and columns b, b+s1, ..., so a strided
    window becomes a shifted window of one phase. Only the padding is zeroed; the rest is copied once."""
    xp = _xp(xp_)
    N, C, H, W = xp_.shape
    t, _, l, _ = pads
    Hp, Wp = H + pads[0] + pads[1], W + pads[2] + pads[3]
    Hq, Wq = _phase_shape(Hp, Wp, s)
    P = xp.empty((s[0], s[1], N, C, Hq, Wq), xp_.dtype)
    if xp is np and xp_.dtype in (np.float32, np.float64):  # one pass in C++ (csrc/kernels/conv2d.cpp)
        _C._cpu.conv2d_phases(np.ascontiguousarray(xp_), P, t, l, False, _threads.count)
        return P
    pairs = []
    for a in range(s[0]):
        for b in range(s[1]):
            # Phase rows u hold padded row a + s0*u, input row a + s0*u - t: inside the input for u0 <= u < u1.
            u0, v0 = -(-(t - a) // s[0]), -(-(l - b) // s[1])
            u1, v1 = -(-(H + t - a) // s[0]), -(-(W + l - b) // s[1])
            ph = P[a, b]
            ph[:, :, :u0] = 0
            ph[:, :, u1:] = 0
            ph[:, :, u0:u1, :v0] = 0
            ph[:, :, u0:u1, v1:] = 0
            if u0 < u1 and v0 < v1:
                pairs.append((ph[:, :, u0:u1, v0:v1], xp_[:, :, a + s[0] * u0 - t::s[0], b + s[1] * v0 - l::s[1]]))
    _copy_all(pairs)
    return P


def _offsets(kh: int, kw: int, s, d, Wrow: int):
    """Per kernel position: (phase row, phase col, offset into the flattened phase image)."""
    out = []
    for i in range(kh):
        for j in range(kw):
            r, c = i * d[0], j * d[1]
            out.append((r % s[0], c % s[1], (r // s[0]) * Wrow + c // s[1]))
    return out


def _columns(xp_, kh: int, kw: int, s, d, G: int, oh: int, ow: int, phases=None):
    """The column matrix (G, kh*kw*Cg, N, L) of the padded input and its row pitch Wrow: rows ordered (kernel
    row, kernel col, channel), images side by side along the columns so that each group is one large GEMM.

    Output position (y, x) is column y*Wrow + x, L = (oh-1)*Wrow + ow: each kernel position's rows are one
    contiguous slice of the flattened padded image (stride 1, Wrow = Wp) or of one stride phase of it
    (Wrow = phase width), copied a channel and image at a time; columns with x >= ow are cropped later."""
    N, C, Hp, Wp = xp_.shape
    Cg = C // G
    K = kh * kw * Cg
    if s == (1, 1):
        Wrow = Wp
        src = xp_.reshape(1, 1, N, G, Cg, Hp * Wp)
    else:
        Hq, Wrow = _phase_shape(Hp, Wp, s)
        src = (_phases(xp_, s) if phases is None else phases).reshape(s[0], s[1], N, G, Cg, Hq * Wrow)
    src = src.transpose(0, 1, 3, 4, 2, 5)  # (s0, s1, G, Cg, N, flat) view
    L = (oh - 1) * Wrow + ow
    cols = _scratch((G, K, N, L), xp_.dtype, xp_)
    _copy_all([(cols[:, k * Cg:(k + 1) * Cg], src[a, b, ..., off:off + L])
               for k, (a, b, off) in enumerate(_offsets(kh, kw, s, d, Wrow))])
    return cols, Wrow


def _flat_weight(w, G: int):
    """(O, Cg, kh, kw) -> (G, Og, kh*kw*Cg), the column matrix's row order."""
    O, Cg, kh, kw = w.shape
    return w.reshape(G, O // G, Cg, kh, kw).transpose(0, 1, 3, 4, 2).reshape(G, O // G, kh * kw * Cg)


def _subsampled(xp_, s, oh: int, ow: int, G: int):
    """A 1x1 conv's columns: the (strided) input as (G, Cg, N, oh*ow)."""
    xp = _xp(xp_)
    N, C = xp_.shape[:2]
    xs = xp_[:, :, ::s[0], ::s[1]][:, :, :oh, :ow] if s != (1, 1) else xp_
    return _contiguous(xs.reshape(N, G, C // G, oh, ow).transpose(1, 2, 0, 3, 4)).reshape(G, C // G, N, oh * ow)


def _gemm(a, b):
    """(G, M, K) @ (G, K, ...) over the flattened trailing dims: one large GEMM per group."""
    return _matmul_any(a, b.reshape(b.shape[0], b.shape[1], -1))


def _matmul_any(a, b):
    """a @ b: on the intra-op pool for NumPy arrays (linalg._matmul), CuPy's matmul on the GPU."""
    return _matmul(a, b) if type(a) is np.ndarray else _xp(a).matmul(a, b)


def _rows_view(a, lead: tuple, oh: int, ow: int, Wp: int):
    """View (lead..., L) flat-trick rows as (lead..., oh, ow): row y starts at y*Wp (no copy)."""
    xp = _xp(a)
    it = a.dtype.itemsize
    return xp.lib.stride_tricks.as_strided(a, lead + (oh, ow), tuple(a.strides[:-1]) + (Wp * it, it))


# ------------------------------------------------------------------ the C++ tap kernels (AVX-512 or AVX2, float32)


# The smallest output planes (positions per image) the tap kernels take. Below them the per-tile work is
# too short to pay for a tile's setup and final sums, and one GEMM over the whole batch's columns is faster
# (measured at ResNet-18's 14x14 and 7x7 layers: the weight gradient at 14x14 and everything at 7x7).
TAPS_MIN_PLANE = 100
TAPS_MIN_PLANE_WEIGHT_GRAD = 400


# Groups take the tap kernels when each has at least this many input channels (fewer: the row kernel of
# conv2d_grouped.cpp is faster) and a whole number of 8-channel register tiles of outputs.
TAPS_MIN_GROUP_CHANNELS = 8


def _taps_ok(groups: int, plane: int, *arrays, weight_grad: bool = False, group_io=(0, 0)) -> bool:
    """Whether the C++ tap kernels take this conv: float32 NumPy arrays, an output plane of at least
    TAPS_MIN_PLANE (TAPS_MIN_PLANE_WEIGHT_GRAD) positions, a CPU with AVX-512 or AVX2 (the capability in use:
    _C._cpu.get_cpu_capability); with groups, group_io = (input, output) channels per group must give at least
    TAPS_MIN_GROUP_CHANNELS inputs and outputs in whole tiles."""
    if groups > 1 and (group_io[0] < TAPS_MIN_GROUP_CHANNELS or group_io[1] % 8):
        return False
    return (_C._cpu.conv2d_supported() and plane >= (TAPS_MIN_PLANE_WEIGHT_GRAD if weight_grad else TAPS_MIN_PLANE)
            and all(type(a) is np.ndarray and a.dtype == np.float32 for a in arrays))


# Grouped convs with at most this many input channels per group (depthwise: 1) take the row kernel of
# csrc/kernels/conv2d_grouped.cpp (any CPU, float32/float64); wider groups keep one GEMM per group.
GROUPED_MAX_CHANNELS = 16


def _grouped_ok(groups: int, cg: int, *arrays) -> bool:
    """Whether conv2d_grouped takes this conv: groups > 1 with few channels per group, NumPy float arrays."""
    return (groups > 1 and cg <= GROUPED_MAX_CHANNELS and arrays[0].dtype in (np.float32, np.float64)
            and all(type(a) is np.ndarray and a.dtype == arrays[0].dtype for a in arrays))


def _taps_source(xp_, kh: int, kw: int, s, d, oh: int, ow: int, phases=None):
    """The padded input as the tap kernels read it: (src, sn, sc, toff, wrow), so that output position
    (y, x) of image n reads tap t of channel c at src[n*sn + c*sc + toff[t] + y*wrow + x]."""
    N, C, Hp, Wp = xp_.shape
    if s == (1, 1):
        src, Hs, wrow = np.ascontiguousarray(xp_), Hp, Wp
        toff = [i * d[0] * Wp + j * d[1] for i in range(kh) for j in range(kw)]
    elif kh == kw == 1:  # only the sampled positions are read: gather them once
        src, Hs, wrow = _contiguous(xp_[:, :, ::s[0], ::s[1]][:, :, :oh, :ow]), oh, ow
        toff = [0]
    else:
        Hs, wrow = _phase_shape(Hp, Wp, s)
        src = _phases(xp_, s) if phases is None else phases
        toff = [((a * s[1] + b) * N * C) * Hs * wrow + off for a, b, off in _offsets(kh, kw, s, d, wrow)]
    return src, C * Hs * wrow, Hs * wrow, np.asarray(toff, np.int64), wrow


def _taps_forward(xp_, w, s, d, bias, phases=None, groups: int = 1):
    N, C, Hp, Wp = xp_.shape
    O, Cg, kh, kw = w.shape
    oh, ow = _out_size(Hp, kh, s[0], d[0]), _out_size(Wp, kw, s[1], d[1])
    out = np.empty((N, O, oh, ow), np.float32)
    if (kh, kw) == (3, 3) and s == (1, 1) and d == (1, 1) and groups == 1:  # Winograd F(2x2, 3x3): 16 products
        _C._cpu.conv2d_winograd(np.ascontiguousarray(xp_), np.ascontiguousarray(w), bias, out, _threads.count)
        return out
    src, sn, sc, toff, wrow = _taps_source(xp_, kh, kw, s, d, oh, ow, phases)
    _C._cpu.conv2d_taps(src, sn, sc, np.ascontiguousarray(w).reshape(O, Cg, kh * kw), toff, bias, out, wrow,
                        groups, _threads.count)
    return out


def _taps_input_grad(g, w, Hp: int, Wp: int, s, d, crop, groups: int = 1, taps: bool = True):
    """A strided (or 1x1) conv's input gradient: stride phase (a, b) of the padded input, rows a, a+s0, ...
    and columns b, b+s1, ..., receives only the taps (i, j) with d0*i = a and d1*j = b (mod s), each from
    the output gradient shifted by (d0*i // s0, d1*j // s1): one stride-1 correlation per phase, written
    into the phase images, which are then merged into the (cropped) gradient in one pass. taps: by the tap
    kernels (float32, AVX-512), else by conv2d_grouped's row kernel."""
    N, O, oh, ow = g.shape
    _, Cg, kh, kw = w.shape
    C, Og = Cg * groups, O // groups
    Hq, Wq = _phase_shape(Hp, Wp, s)
    qh, qw = d[0] * (kh - 1) // s[0], d[1] * (kw - 1) // s[1]
    gpad = np.ascontiguousarray(_pad_array(g, (qh, max(0, Hq - oh), qw, max(0, Wq - ow))))
    R, Wg = gpad.shape[2], gpad.shape[3]
    direct = s == (1, 1) and not any(crop)  # the one phase is the gradient itself
    # (With direct, P is a view of the returned array, so that AccumulateGrad can keep that array as it is.)
    gx = np.empty((N, C, Hq, Wq), g.dtype) if direct else None
    P = gx[None, None] if direct else np.empty((s[0], s[1], N, C, Hq, Wq), g.dtype)
    wg = w.reshape(groups, Og, Cg, kh, kw)
    weights, toffs, outs = [], [], []
    for a in range(s[0]):
        for b in range(s[1]):
            here = [(i, j) for i in range(kh) for j in range(kw) if d[0] * i % s[0] == a and d[1] * j % s[1] == b]
            if not here:  # no tap lands on this phase: its gradient is zero
                P[a, b] = 0
                continue
            # (C, Og, taps): input channel c of group c // Cg gathers that group's Og output channels.
            wt = wg[:, :, :, [i for i, _ in here], [j for _, j in here]].transpose(0, 2, 1, 3).reshape(C, Og, -1)
            weights.append(np.ascontiguousarray(wt))
            toffs.append(np.asarray([(qh - d[0] * i // s[0]) * Wg + qw - d[1] * j // s[1] for i, j in here], np.int64))
            outs.append(P[a, b])
    if taps:  # all phases in one call: each block of the gradient's rows is read once for every phase
        _C._cpu.conv2d_taps_many(gpad, O * R * Wg, R * Wg, weights, toffs, outs, Wg, groups, _threads.count)
    else:
        for wt, toff, out in zip(weights, toffs, outs):
            _C._cpu.conv2d_grouped(gpad, O * R * Wg, R * Wg, wt, toff, None, out, Wg, groups, _threads.count)
    if direct:
        return gx
    gx = np.empty((N, C, Hp - crop[0] - crop[1], Wp - crop[2] - crop[3]), g.dtype)
    _C._cpu.conv2d_phases(gx, P, crop[0], crop[2], True, _threads.count)
    return gx


# Winograd's weight gradient keeps a 16 x C x O sum per thread: beyond this it no longer fits the core's L2.
WINOGRAD_MAX_WEIGHT = 128 * 128


def _taps_weight_grad(xp_, g, kh: int, kw: int, s, d, phases=None, bias_grad: bool = False, groups: int = 1):
    N, C = xp_.shape[:2]
    O, oh, ow = g.shape[1:]
    if (kh, kw) == (3, 3) and s == (1, 1) and d == (1, 1) and C * O <= WINOGRAD_MAX_WEIGHT and groups == 1:
        gw = np.empty((O, C, 3, 3), np.float32)
        gb = np.empty(O, np.float32) if bias_grad else None
        _C._cpu.conv2d_winograd_weight_grad(np.ascontiguousarray(xp_), np.ascontiguousarray(g), gw, gb,
                                            _threads.count)
        return gw, gb
    src, sn, sc, toff, wrow = _taps_source(xp_, kh, kw, s, d, oh, ow, phases)
    gw = np.empty((O, C // groups, kh * kw), np.float32)
    gb = np.empty(O, np.float32) if bias_grad else None
    _C._cpu.conv2d_taps_weight_grad(src, sn, sc, np.ascontiguousarray(g), toff, wrow, gw, gb, groups,
                                    _threads.count)
    return gw.reshape(O, C // groups, kh, kw), gb


# ------------------------------------------------------------------ the three array routines


def conv_forward_array(xp_, w, s, d, groups: int, phases=None, bias=None):
    """Correlate padded input xp_ (N, C, Hp, Wp) with w (O, C/groups, kh, kw), plus bias (O,) if given: one
    GEMM per group over the whole batch's column matrix, or the tap kernel."""
    xp = _xp(xp_)
    N, C, Hp, Wp = xp_.shape
    O, Cg, kh, kw = w.shape
    G = groups
    oh, ow = _out_size(Hp, kh, s[0], d[0]), _out_size(Wp, kw, s[1], d[1])
    if _taps_ok(groups, oh * ow, xp_, w, group_io=(Cg, O // G)) and (bias is None or bias.dtype == np.float32):
        return _taps_forward(xp_, w, s, d, bias, phases, groups)
    if _grouped_ok(groups, Cg, xp_, w) and (bias is None or bias.dtype == xp_.dtype):
        src, sn, sc, toff, wrow = _taps_source(xp_, kh, kw, s, d, oh, ow, phases)
        out = np.empty((N, O, oh, ow), xp_.dtype)
        _C._cpu.conv2d_grouped(src, sn, sc, np.ascontiguousarray(w).reshape(O, Cg, kh * kw), toff, bias, out, wrow,
                               groups, _threads.count)
        return out
    w2 = xp.ascontiguousarray(_flat_weight(w, G))
    if kh == kw == 1:
        y = _gemm(w2, _subsampled(xp_, s, oh, ow, G))
        y = _contiguous(y.reshape(O, N, oh, ow).transpose(1, 0, 2, 3))
    else:
        cols, Wrow = _columns(xp_, kh, kw, s, d, G, oh, ow, phases)
        y = _rows_view(_gemm(w2, cols).reshape(O, N, cols.shape[-1]), (O, N), oh, ow, Wrow)
        y = _contiguous(y.reshape(O, N, oh, ow).transpose(1, 0, 2, 3))
    if bias is not None:
        y += bias.reshape(1, -1, 1, 1)
    return y


def _grad_rows(g, G: int):
    """The output gradient as (G, Og, N, oh*ow), the GEMMs' layout."""
    N, O, oh, ow = g.shape
    return _contiguous(g.reshape(N, G, O // G, oh * ow).transpose(1, 2, 0, 3))


def conv_input_grad_array(g, w, Hp: int, Wp: int, s, d, groups: int, crop=(0, 0, 0, 0)):
    """The adjoint of conv_forward_array in its input: the gradient of the padded input (N, C, Hp, Wp), less
    `crop` = (top, bottom, left, right) (the padding, whose gradient nobody wants), as a contiguous array."""
    xp = _xp(g)
    N, O, oh, ow = g.shape
    _, Cg, kh, kw = w.shape
    G = groups
    Og = O // G
    C = Cg * G
    if s == (1, 1) and (kh > 1 or kw > 1):
        # Stride 1: the adjoint is a correlation of the fully padded gradient with the spatially flipped,
        # in/out-swapped kernel, so it takes the forward's path.
        ph, pw = d[0] * (kh - 1), d[1] * (kw - 1)
        # Only the uncropped rows and columns are computed.
        gpad = _pad_array(g, (ph - crop[0], Hp - oh - crop[1], pw - crop[2], Wp - ow - crop[3]))
        wf = w.reshape(G, Og, Cg, kh, kw)[..., ::-1, ::-1].transpose(0, 2, 1, 3, 4).reshape(C, Og, kh, kw)
        return conv_forward_array(gpad, wf, s, d, groups)
    if _taps_ok(groups, (Hp // s[0]) * (Wp // s[1]), g, w, group_io=(Og, Cg)):
        return _taps_input_grad(g, w, Hp, Wp, s, d, crop, groups)
    if _grouped_ok(groups, Og, g, w):
        return _taps_input_grad(g, w, Hp, Wp, s, d, crop, groups, taps=False)
    if kh == kw == 1:  # a 1x1 kernel touches each sampled input position once: one GEMM, one strided write
        r = _gemm(xp.ascontiguousarray(_flat_weight(w, G).transpose(0, 2, 1)), _grad_rows(g, G))
        r = r.reshape(C, N, oh, ow).transpose(1, 0, 2, 3)
        if s == (1, 1) and (oh, ow) == (Hp, Wp):
            return xp.ascontiguousarray(_crop(r, crop))
        gx = xp.zeros((N, C, Hp, Wp), g.dtype)
        gx[:, :, :s[0] * (oh - 1) + 1:s[0], :s[1] * (ow - 1) + 1:s[1]] = r
        return xp.ascontiguousarray(_crop(gx, crop))
    # col2im: gradient columns from one GEMM per group, added back into the input's stride phases (contiguous
    # slices, as _columns reads them), then the phases interleaved into the image.
    Hq, Wq = _phase_shape(Hp, Wp, s)
    L = (oh - 1) * Wq + ow
    gf = xp.zeros((G, Og, N, L), g.dtype)
    _rows_view(gf, (G, Og, N), oh, ow, Wq)[...] = g.reshape(N, G, Og, oh, ow).transpose(1, 2, 0, 3, 4)
    w2t = xp.ascontiguousarray(_flat_weight(w, G).transpose(0, 2, 1))
    gc = _gemm(w2t, gf).reshape(G, kh * kw * Cg, N, L)
    P = xp.zeros((s[0], s[1], G, Cg, N, Hq * Wq), g.dtype)
    for k, (a, b, off) in enumerate(_offsets(kh, kw, s, d, Wq)):
        P[a, b, ..., off:off + L] += gc[:, k * Cg:(k + 1) * Cg]
    P = P.reshape(s[0], s[1], C, N, Hq, Wq)
    gx = xp.empty((N, C, Hp, Wp), g.dtype)
    for a in range(s[0]):
        for b in range(s[1]):
            dst = gx[:, :, a::s[0], b::s[1]]
            dst[...] = P[a, b, :, :, :dst.shape[2], :dst.shape[3]].transpose(1, 0, 2, 3)
    return xp.ascontiguousarray(_crop(gx, crop))


def conv_weight_grad_array(xp_, g, kh: int, kw: int, s, d, groups: int, phases=None, bias_grad: bool = False):
    """The gradient of w (O, C/groups, kh, kw) given the padded input and the output's gradient: the output
    gradient times the (recomputed) column matrix, the whole batch in one GEMM per group, or the tap kernel.
    With bias_grad, returns (grad_weight, grad_bias), the bias's summed in the same pass where it can be."""
    if _taps_ok(groups, g.shape[2] * g.shape[3], xp_, g, weight_grad=True,
                group_io=(xp_.shape[1] // groups, g.shape[1] // groups)):
        gw, gb = _taps_weight_grad(xp_, g, kh, kw, s, d, phases, bias_grad, groups)
        return (gw, gb) if bias_grad else gw
    if _grouped_ok(groups, xp_.shape[1] // groups, xp_, g):
        N, C = xp_.shape[:2]
        O, oh, ow = g.shape[1:]
        src, sn, sc, toff, wrow = _taps_source(xp_, kh, kw, s, d, oh, ow, phases)
        gw = np.empty((O, C // groups, kh * kw), g.dtype)
        gb = np.empty(O, g.dtype) if bias_grad else None
        _C._cpu.conv2d_grouped_weight_grad(src, sn, sc, np.ascontiguousarray(g), toff, wrow, groups, gw, gb,
                                           _threads.count)
        gw = gw.reshape(O, C // groups, kh, kw)
        return (gw, gb) if bias_grad else gw
    xp = _xp(g)
    N, C, Hp, Wp = xp_.shape
    _, O, oh, ow = g.shape
    G = groups
    Og, Cg = O // G, C // G
    if kh == kw == 1:
        cols = _subsampled(xp_, s, oh, ow, G)
        gf = _grad_rows(g, G)
    else:
        cols, Wrow = _columns(xp_, kh, kw, s, d, G, oh, ow, phases)
        gf = xp.zeros((G, Og, N, cols.shape[-1]), g.dtype)
        _rows_view(gf, (G, Og, N), oh, ow, Wrow)[...] = g.reshape(N, G, Og, oh, ow).transpose(1, 2, 0, 3, 4)
    # cols @ gf.T rather than gf @ cols.T: OpenBLAS runs the long contraction about twice as fast this way round.
    gwt = _matmul_any(cols.reshape(G, cols.shape[1], -1), gf.reshape(G, Og, -1).swapaxes(-1, -2))  # (G, K, Og)
    gw = xp.ascontiguousarray(gwt.reshape(G, kh, kw, Cg, Og).transpose(0, 4, 3, 1, 2)).reshape(O, Cg, kh, kw)
    return (gw, g.sum(axis=(0, 2, 3))) if bias_grad else gw


# ------------------------------------------------------------------ argument checks


def _check_conv_input(name: str, x: Tensor, w: Tensor, nd: int, transposed: bool, groups: int):
    xd, wd = x._data, w._data
    if xd.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {name}, but got input "
                           f"of size: {list(xd.shape)}")
    if wd.ndim != nd + 2:
        raise RuntimeError(f"weight should have at least three dimensions" if wd.ndim < 3 else
                           f"Expected {nd + 2}-dimensional weight for {nd + 2}-dimensional input {list(xd.shape)}, "
                           f"but got {wd.ndim}-dimensional weight of size {list(wd.shape)} instead")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if xd.dtype != wd.dtype:
        from ._common import _short
        raise RuntimeError(f"expected scalar type {_short(x.dtype)} but found {_short(w.dtype)}")
    C = xd.shape[-nd - 1]
    if not transposed:
        if wd.shape[0] % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                               f"but got weight of size {list(wd.shape)} instead")
        if C != wd.shape[1] * groups:
            shp = list(xd.shape) if xd.ndim == nd + 2 else [1] + list(xd.shape)
            raise RuntimeError(f"Given groups={groups}, weight of size {list(wd.shape)}, expected input{shp} to have "
                               f"{wd.shape[1] * groups} channels, but got {C} channels instead")
    else:
        if C != wd.shape[0]:
            shp = list(xd.shape) if xd.ndim == nd + 2 else [1] + list(xd.shape)
            raise RuntimeError(f"Given transposed=1, weight of size {list(wd.shape)}, expected input{shp} to have "
                               f"{wd.shape[0]} channels, but got {C} channels instead")
        if C % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                               f"but got weight of size {list(wd.shape)} instead")


def _as4d(a, nd: int, batched: bool):
    if not batched:
        a = a[None]
    return a[:, :, None, :] if nd == 1 else a


def _from4d(a, nd: int, batched: bool):
    if nd == 1:
        a = a[:, :, 0, :]
    return a if batched else a[0]


def _same_pads(k, d) -> list:
    pads = []
    for kk, dd in zip(k, d):
        total = dd * (kk - 1)
        pads.append((total // 2, total - total // 2))
    return pads


def _conv_pads(padding, s, d, k, nd: int) -> list:
    """Per spatial dim (before, after) zero padding from conv's `padding` ("valid", "same", int or tuple),
    with PyTorch's checks of stride, dilation and padding."""
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * nd
        elif padding == "same":
            if any(v != 1 for v in s):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            pads = _same_pads(k, d)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        pads = [(p, p) for p in _pair(padding, nd, "padding")]
    if any(v <= 0 for v in s):
        raise RuntimeError("non-positive stride is not supported")
    if any(v <= 0 for v in d):
        raise RuntimeError("dilation should be greater than zero")
    if any(p < 0 for pp in pads for p in pp):
        raise RuntimeError("negative padding is not supported")
    return pads


# ------------------------------------------------------------------ conv


def _convnd(name: str, nd: int, input: Tensor, weight: Tensor, bias, stride, padding, dilation, groups: int) -> Tensor:
    if _autocast.active:
        return _autocast.dispatch(name, _convnd, name, nd, input, weight, bias, stride, padding, dilation, groups)
    x, w = input, weight
    _check_conv_input(name, x, w, nd, False, groups)
    if bias is not None and (bias._data.ndim != 1 or bias._data.shape[0] != w._data.shape[0]):
        raise RuntimeError(f"Given weight of size {list(w._data.shape)}, expected bias to be 1-dimensional with "
                           f"{w._data.shape[0]} elements, but got bias of size {list(bias._data.shape)} instead")
    s = _pair(stride, nd, "stride")
    d = _pair(dilation, nd, "dilation")
    k = tuple(w._data.shape[2:])
    pads = _conv_pads(padding, s, d, k, nd)
    xd = x._data
    batched = xd.ndim == nd + 2
    x4 = _compute(_as4d(xd, nd, batched))
    w4 = _compute(w._data[:, :, None, :] if nd == 1 else w._data)
    if nd == 1:
        s, d, pads, k = (1,) + s, (1,) + d, [(0, 0)] + pads, (1,) + k
    p4 = (pads[0][0], pads[0][1], pads[1][0], pads[1][1])
    Hp, Wp = x4.shape[2] + p4[0] + p4[1], x4.shape[3] + p4[2] + p4[3]
    if Hp < d[0] * (k[0] - 1) + 1 or Wp < d[1] * (k[1] - 1) + 1:
        shp = [x4.shape[1]] + [Hp, Wp][2 - nd:]
        ks = list(k[2 - nd:]) if nd == 2 else [k[1]]
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(str(v) for v in shp[1:])}). "
                           f"Kernel size: ({' x '.join(str(v) for v in ks)}). Kernel size can't be greater than "
                           f"actual input size")
    phases = None
    if s != (1, 1) and (k[0] > 1 or k[1] > 1):
        # A strided conv's stride phases serve the forward and the weight gradient alike: split them once,
        # straight from the unpadded input. The routines then read only the padded input's shape.
        phases = _phases(x4, s, p4)
        xpad = _xp(x4).broadcast_to(_xp(x4).zeros((), x4.dtype), (x4.shape[0], x4.shape[1], Hp, Wp))
    else:
        xpad = _pad_array(x4, p4)
    y = conv_forward_array(xpad, w4, s, d, groups, phases, None if bias is None else _compute(bias._data))
    out = _wrap(_from4d(y.astype(xd.dtype, copy=False), nd, batched))
    if needs_grad(x, w, bias):
        rx, rw = x._requires_grad, w._requires_grad
        rb = bias is not None and bias._requires_grad

        def conv_backward(g):
            if _grad_enabled():  # create_graph: the same formulas in differentiable ops, for double backward
                return _conv_backward_graph(g, x, w, bias is not None, nd, batched, p4, Hp, Wp, s, d, k, groups,
                                            rx, rw, rb)
            # One contiguous copy of a broadcast or strided gradient serves all three gradients.
            g4 = xp_contig(_compute(_as4d(g._data, nd, batched)))
            gx = gw = gb = None
            if rx:
                gx4 = conv_input_grad_array(g4, w4, Hp, Wp, s, d, groups, p4).astype(xd.dtype, copy=False)
                gx = _wrap(_from4d(gx4, nd, batched))
            gb4 = None
            if rw:
                gw4 = conv_weight_grad_array(xpad, g4, k[0], k[1], s, d, groups, phases, bias_grad=rb)
                if rb:
                    gw4, gb4 = gw4
                gw4 = gw4.astype(w._data.dtype, copy=False)
                gw = _wrap(gw4[:, :, 0, :] if nd == 1 else gw4)
            if rb:
                gb4 = g4.sum(axis=(0, 2, 3)) if gb4 is None else gb4
                gb = _wrap(gb4.astype(bias._data.dtype, copy=False))
            return (gx, gw) if bias is None else (gx, gw, gb)
        inputs = (x, w) if bias is None else (x, w, bias)
        record("ConvolutionBackward0", conv_backward, out, inputs, (x, w))
    return out


def _t4(t: Tensor, nd: int, batched: bool) -> Tensor:
    if not batched:
        t = t.unsqueeze(0)
    return t.unsqueeze(2) if nd == 1 else t


def _f4(t: Tensor, nd: int, batched: bool) -> Tensor:
    if nd == 1:
        t = t.squeeze(2)
    return t if batched else t.squeeze(0)


def _pad_t(t: Tensor, p4) -> Tensor:
    from .nn import pad
    return pad(t, (p4[2], p4[3], p4[0], p4[1])) if any(p4) else t


def _weight_grad_graph(xpad: Tensor, g: Tensor, k: tuple, s, d, G: int) -> Tensor:
    """conv's weight gradient as a conv (differentiable): correlate the input, batch as channels, with the
    output gradient, stride and dilation swapped; one conv per group. 2d or 3d, by len(k)."""
    from .shape import cat
    conv = conv2d if len(k) == 2 else conv3d
    C, O = xpad.shape[1], g.shape[1]
    Cg, Og = C // G, O // G
    xt, gt = xpad.transpose(0, 1), g.transpose(0, 1)
    crop = (slice(None), slice(None)) + tuple(slice(0, kk) for kk in k)
    parts = [conv(xt[gi * Cg:(gi + 1) * Cg], gt[gi * Og:(gi + 1) * Og], None, d, 0, s, 1)[crop].transpose(0, 1)
             for gi in range(G)]
    return parts[0] if G == 1 else cat(parts, 0)


def _conv_backward_graph(g, x, w, has_bias, nd, batched, p4, Hp, Wp, s, d, k, groups, rx, rw, rb):
    g4 = _t4(g, nd, batched)
    w4 = w.unsqueeze(2) if nd == 1 else w
    oh, ow = g4.shape[2], g4.shape[3]
    gx = gw = gb = None
    if rx:
        op = (Hp - ((oh - 1) * s[0] + d[0] * (k[0] - 1) + 1), Wp - ((ow - 1) * s[1] + d[1] * (k[1] - 1) + 1))
        full = _conv_transposend("conv_transpose2d", 2, g4, w4, None, s, 0, op, groups, d)
        # contiguous, as PyTorch's input gradient is (a gradient penalty's g.view(B, -1) needs it)
        gx = _f4(full[:, :, p4[0]:Hp - p4[1], p4[2]:Wp - p4[3]].contiguous(), nd, batched)
    if rw:
        gw = _weight_grad_graph(_pad_t(_t4(x, nd, batched), p4), g4, k, s, d, groups)
        gw = gw.squeeze(2) if nd == 1 else gw
    if rb:
        gb = g4.sum((0, 2, 3))
    return (gx, gw, gb) if has_bias else (gx, gw)


def _conv_transpose_backward_graph(g, x, w, has_bias, nd, batched, p4, H, W, Hp, Wp, op, s, d, k, groups, rx, rw, rb):
    g4 = _t4(g, nd, batched)
    w4 = w.unsqueeze(2) if nd == 1 else w
    gpad = _pad_t(g4, p4)
    gx = gw = gb = None
    if rx:
        gx = _f4(_convnd("conv2d", 2, gpad, w4, None, s, 0, d, groups)[:, :, :H, :W].contiguous(), nd, batched)
    if rw:
        gw = _weight_grad_graph(gpad[:, :, :Hp - op[0], :Wp - op[1]], _t4(x, nd, batched), k, s, d, groups)
        gw = gw.squeeze(2) if nd == 1 else gw
    if rb:
        gb = g4.sum((0, 2, 3))
    return (gx, gw, gb) if has_bias else (gx, gw)


def _compute(a):
    """Halves (float16, bfloat16) are convolved in float32: NumPy has no fast half-precision GEMM."""
    return a.astype(np.float32) if a.dtype.itemsize < 4 and a.dtype.kind in "fV" else a


def xp_contig(a):
    return _xp(a).ascontiguousarray(a)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """1d cross-correlation of (N, C, L) input with (O, C/groups, k) weight."""
    return _convnd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """2d cross-correlation of (N, C, H, W) input with (O, C/groups, kh, kw) weight."""
    return _convnd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


# ------------------------------------------------------------------ conv_transpose


def _conv_transposend(name: str, nd: int, input: Tensor, weight: Tensor, bias, stride, padding, output_padding,
                      groups: int, dilation) -> Tensor:
    if _autocast.active:
        return _autocast.dispatch(name, _conv_transposend, name, nd, input, weight, bias, stride, padding,
                                  output_padding, groups, dilation)
    x, w = input, weight
    _check_conv_input(name, x, w, nd, True, groups)
    s = _pair(stride, nd, "stride")
    d = _pair(dilation, nd, "dilation")
    p = _pair(padding, nd, "padding")
    op = _pair(output_padding, nd, "output_padding")
    if any(v <= 0 for v in s):
        raise RuntimeError("non-positive stride is not supported")
    if any(v <= 0 for v in d):
        raise RuntimeError("dilation should be greater than zero")
    if any(v < 0 for v in p):
        raise RuntimeError("negative padding is not supported")
    for a, b, c in zip(op, s, d):
        if a >= b and a >= c:
            raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                               f"output_padding_height: {op[0]} output_padding_width: {op[-1]} stride_height: "
                               f"{s[0]} stride_width: {s[-1]} dilation_height: {d[0]} dilation_width: {d[-1]}")
    xd = x._data
    batched = xd.ndim == nd + 2
    x4 = _compute(_as4d(xd, nd, batched))
    w4 = _compute(w._data[:, :, None, :] if nd == 1 else w._data)  # (Cin, Cout/groups, kh, kw): conv's (O, Cg, ...)
    k = tuple(w4.shape[2:])
    if nd == 1:
        s, d, p, op = (1,) + s, (1,) + d, (0,) + p, (0,) + op
    H, W = x4.shape[2], x4.shape[3]
    Hp = (H - 1) * s[0] + d[0] * (k[0] - 1) + 1 + op[0]
    Wp = (W - 1) * s[1] + d[1] * (k[1] - 1) + 1 + op[1]
    oh, ow = Hp - 2 * p[0], Wp - 2 * p[1]
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input size per channel: ({H} x {W}). Calculated output size per channel: "
                           f"({oh} x {ow}). Output size is too small")
    p4 = (p[0], p[0], p[1], p[1])
    y = conv_input_grad_array(x4, w4, Hp, Wp, s, d, groups, p4)
    if bias is not None:
        y += bias._data.reshape(1, -1, 1, 1)
    out = _wrap(_from4d(y.astype(xd.dtype, copy=False), nd, batched))
    if needs_grad(x, w, bias):
        rx, rw = x._requires_grad, w._requires_grad
        rb = bias is not None and bias._requires_grad

        def conv_transpose_backward(g):
            if _grad_enabled():
                return _conv_transpose_backward_graph(g, x, w, bias is not None, nd, batched, p4, H, W, Hp, Wp, op,
                                                      s, d, k, groups, rx, rw, rb)
            g4 = _compute(_as4d(g._data, nd, batched))
            gpad = _pad_array(g4, p4)
            gx = gw = gb = None
            if rx:
                gxa = conv_forward_array(gpad, w4, s, d, groups)[:, :, :H, :W]
                gx = _wrap(_from4d(xp_contig(gxa).astype(xd.dtype, copy=False), nd, batched))
            if rw:
                # conv's weight gradient with the roles swapped: g is the (padded) input, x the output gradient.
                gw4 = conv_weight_grad_array(gpad[:, :, :Hp - op[0], :Wp - op[1]], x4, k[0], k[1], s, d, groups)
                gw4 = gw4.astype(w._data.dtype, copy=False)
                gw = _wrap(gw4[:, :, 0, :] if nd == 1 else gw4)
            if rb:
                gb = _wrap(g4.sum(axis=(0, 2, 3)).astype(bias._data.dtype, copy=False))
            return (gx, gw) if bias is None else (gx, gw, gb)
        inputs = (x, w) if bias is None else (x, w, bias)
        record("ConvolutionBackward0", conv_transpose_backward, out, inputs, (x, w))
    return out


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The adjoint of conv1d (a "deconvolution"): (N, Cin, L) with (Cin, Cout/groups, k) weight."""
    return _conv_transposend("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                             dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The adjoint of conv2d (a "deconvolution"): (N, Cin, H, W) with (Cin, Cout/groups, kh, kw) weight."""
    return _conv_transposend("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                             dilation)


# ------------------------------------------------------------------ 3d: one im2col GEMM per group (NCDHW)


def _pad_nd(x, pads):
    """Zero-pad the spatial dims of (N, C, *S) by pads = [(before, after), ...] (one pair per spatial dim)."""
    if not any(a or b for a, b in pads):
        return x
    xp = _xp(x)
    out = xp.zeros(x.shape[:2] + tuple(n + a + b for n, (a, b) in zip(x.shape[2:], pads)), x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(a, a + n) for n, (a, _) in zip(x.shape[2:], pads))] = x
    return out


def _columns3d(xpad, k, s, d, G: int, o):
    """The column matrix (G, Cg*kd*kh*kw, N*od*oh*ow) of the padded input: rows ordered (channel, kernel
    position) as the weight's, the batch side by side along the columns. One strided view, one copy."""
    xp = _xp(xpad)
    N, C = xpad.shape[:2]
    st = xpad.strides
    win = xp.lib.stride_tricks.as_strided(
        xpad, (N, C) + tuple(k) + tuple(o),
        st[:2] + tuple(v * t for v, t in zip(d, st[2:])) + tuple(v * t for v, t in zip(s, st[2:])))
    win = win.reshape((N, G, C // G) + tuple(k) + tuple(o)).transpose(1, 2, 3, 4, 5, 0, 6, 7, 8)
    return _contiguous(win).reshape(G, C // G * math.prod(k), N * math.prod(o))


def _grad_rows3d(g, G: int):
    """The output gradient (N, O, *o) as (G, Og, N*L), the GEMMs' layout."""
    N, O = g.shape[:2]
    return _contiguous(g.reshape(N, G, O // G, -1).transpose(1, 2, 0, 3)).reshape(G, O // G, -1)


def conv3d_forward_array(xpad, w, s, d, groups: int):
    """Correlate padded input (N, C, Dp, Hp, Wp) with w (O, C/groups, kd, kh, kw): one GEMM per group."""
    N = xpad.shape[0]
    O, k = w.shape[0], w.shape[2:]
    o = tuple(_out_size(n, kk, ss, dd) for n, kk, ss, dd in zip(xpad.shape[2:], k, s, d))
    cols = _columns3d(xpad, k, s, d, groups, o)
    y = _matmul_any(_xp(w).ascontiguousarray(w.reshape(groups, O // groups, -1)), cols)
    return _contiguous(y.reshape((groups, O // groups, N) + o).transpose(2, 0, 1, 3, 4, 5)).reshape((N, O) + o)


def conv3d_input_grad_array(g, w, padded: tuple, s, d, groups: int):
    """The adjoint of conv3d_forward_array in its input (col2im): the gradient of the padded input
    (N, C, *padded), the GEMM's columns added back one kernel position at a time."""
    xp = _xp(g)
    N, O = g.shape[:2]
    o = g.shape[2:]
    Cg, k = w.shape[1], w.shape[2:]
    G = groups
    gc = _matmul_any(w.reshape(G, O // G, -1).swapaxes(-1, -2), _grad_rows3d(g, G))
    gc = gc.reshape((G, Cg) + tuple(k) + (N,) + tuple(o))
    gx = xp.zeros((N, G, Cg) + tuple(padded), g.dtype)
    for pos in itertools.product(*(range(kk) for kk in k)):
        win = tuple(slice(i * dd, i * dd + ss * (oo - 1) + 1, ss) for i, dd, ss, oo in zip(pos, d, s, o))
        gx[(slice(None),) * 3 + win] += gc[(slice(None), slice(None)) + pos].transpose(2, 0, 1, 3, 4, 5)
    return gx.reshape((N, G * Cg) + tuple(padded))


def conv3d_weight_grad_array(xpad, g, k, s, d, groups: int):
    """The gradient of w (O, C/groups, *k): the output gradient times the (recomputed) column matrix."""
    O, o = g.shape[1], g.shape[2:]
    cols = _columns3d(xpad, k, s, d, groups, o)
    gw = _matmul_any(_grad_rows3d(g, groups), cols.swapaxes(-1, -2))
    return gw.reshape((O, xpad.shape[1] // groups) + tuple(k))


def _conv3d(input: Tensor, weight: Tensor, bias, stride, padding, dilation, groups: int) -> Tensor:
    if _autocast.active:
        return _autocast.dispatch("conv3d", _conv3d, input, weight, bias, stride, padding, dilation, groups)
    x, w = input, weight
    _check_conv_input("conv3d", x, w, 3, False, groups)
    if bias is not None and (bias._data.ndim != 1 or bias._data.shape[0] != w._data.shape[0]):
        raise RuntimeError(f"Given weight of size {list(w._data.shape)}, expected bias to be 1-dimensional with "
                           f"{w._data.shape[0]} elements, but got bias of size {list(bias._data.shape)} instead")
    s = _pair(stride, 3, "stride")
    d = _pair(dilation, 3, "dilation")
    k = tuple(w._data.shape[2:])
    pads = _conv_pads(padding, s, d, k, 3)
    xd = x._data
    batched = xd.ndim == 5
    x5 = _compute(xd if batched else xd[None])
    w5 = _compute(w._data)
    padded = tuple(n + a + b for n, (a, b) in zip(x5.shape[2:], pads))
    if any(n < dd * (kk - 1) + 1 for n, kk, dd in zip(padded, k, d)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
                           f"Kernel size: ({' x '.join(map(str, k))}). Kernel size can't be greater than actual "
                           f"input size")
    xpad = _pad_nd(x5, pads)
    y = conv3d_forward_array(xpad, w5, s, d, groups)
    if bias is not None:
        y += _compute(bias._data).reshape(1, -1, 1, 1, 1)
    y = y.astype(xd.dtype, copy=False)
    out = _wrap(y if batched else y[0])
    if needs_grad(x, w, bias):
        rx, rw = x._requires_grad, w._requires_grad
        rb = bias is not None and bias._requires_grad

        def conv3d_backward(g):
            if _grad_enabled():  # create_graph: the same formulas in differentiable ops, for double backward
                return _conv3d_backward_graph(g, x, w, bias is not None, batched, pads, padded, s, d, k, groups,
                                              rx, rw, rb)
            g5 = _compute(g._data if batched else g._data[None])
            gx = gw = gb = None
            if rx:
                full = conv3d_input_grad_array(g5, w5, padded, s, d, groups)
                crop = full[(slice(None), slice(None)) + tuple(slice(a, a + n) for n, (a, _) in
                                                               zip(x5.shape[2:], pads))]
                gx5 = _xp(full).ascontiguousarray(crop).astype(xd.dtype, copy=False)
                gx = _wrap(gx5 if batched else gx5[0])
            if rw:
                gw = _wrap(conv3d_weight_grad_array(xpad, g5, k, s, d, groups).astype(w._data.dtype, copy=False))
            if rb:
                gb = _wrap(g5.sum(axis=(0, 2, 3, 4)).astype(bias._data.dtype, copy=False))
            return (gx, gw) if bias is None else (gx, gw, gb)
        inputs = (x, w) if bias is None else (x, w, bias)
        record("ConvolutionBackward0", conv3d_backward, out, inputs, (x, w))
    return out


def _conv3d_backward_graph(g, x, w, has_bias, batched, pads, padded, s, d, k, groups, rx, rw, rb):
    from .nn import pad
    g5 = g if batched else g.unsqueeze(0)
    gx = gw = gb = None
    if rx:
        o = g5.shape[2:]
        op = tuple(n - ((oo - 1) * ss + dd * (kk - 1) + 1) for n, oo, ss, dd, kk in zip(padded, o, s, d, k))
        full = _conv_transpose3d(g5, w, None, s, 0, op, groups, d)
        gx = full[(slice(None), slice(None)) + tuple(slice(a, n - b) for n, (a, b) in zip(padded, pads))].contiguous()
        gx = gx if batched else gx.squeeze(0)
    if rw:
        x5 = x if batched else x.unsqueeze(0)
        xpad = pad(x5, [v for a, b in reversed(pads) for v in (a, b)]) if any(a or b for a, b in pads) else x5
        gw = _weight_grad_graph(xpad, g5, k, s, d, groups)
    if rb:
        gb = g5.sum((0, 2, 3, 4))
    return (gx, gw, gb) if has_bias else (gx, gw)


def _conv_transpose3d(input: Tensor, weight: Tensor, bias, stride, padding, output_padding, groups: int,
                      dilation) -> Tensor:
    if _autocast.active:
        return _autocast.dispatch("conv_transpose3d", _conv_transpose3d, input, weight, bias, stride, padding,
                                  output_padding, groups, dilation)
    x, w = input, weight
    _check_conv_input("conv_transpose3d", x, w, 3, True, groups)
    s = _pair(stride, 3, "stride")
    d = _pair(dilation, 3, "dilation")
    p = _pair(padding, 3, "padding")
    op = _pair(output_padding, 3, "output_padding")
    if any(v <= 0 for v in s):
        raise RuntimeError("non-positive stride is not supported")
    if any(v <= 0 for v in d):
        raise RuntimeError("dilation should be greater than zero")
    if any(v < 0 for v in p):
        raise RuntimeError("negative padding is not supported")
    if any(a >= b and a >= c for a, b, c in zip(op, s, d)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding_depth: {op[0]} output_padding_height: {op[1]} output_padding_width: "
                           f"{op[2]} stride_depth: {s[0]} stride_height: {s[1]} stride_width: {s[2]} "
                           f"dilation_depth: {d[0]} dilation_height: {d[1]} dilation_width: {d[2]}")
    xd = x._data
    batched = xd.ndim == 5
    x5 = _compute(xd if batched else xd[None])
    w5 = _compute(w._data)  # (Cin, Cout/groups, kd, kh, kw): conv's (O, Cg, ...)
    k = tuple(w5.shape[2:])
    size = tuple(x5.shape[2:])
    padded = tuple((n - 1) * ss + dd * (kk - 1) + 1 + oo for n, ss, dd, kk, oo in zip(size, s, d, k, op))
    osz = tuple(n - 2 * pp for n, pp in zip(padded, p))
    if any(v <= 0 for v in osz):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, size))}). Calculated output size "
                           f"per channel: ({' x '.join(map(str, osz))}). Output size is too small")
    pads = [(pp, pp) for pp in p]
    full = conv3d_input_grad_array(x5, w5, padded, s, d, groups)
    y = _xp(full).ascontiguousarray(full[(slice(None), slice(None)) + tuple(slice(pp, pp + n)
                                                                            for pp, n in zip(p, osz))])
    if bias is not None:
        y += _compute(bias._data).reshape(1, -1, 1, 1, 1)
    y = y.astype(xd.dtype, copy=False)
    out = _wrap(y if batched else y[0])
    if needs_grad(x, w, bias):
        rx, rw = x._requires_grad, w._requires_grad
        rb = bias is not None and bias._requires_grad

        def conv_transpose3d_backward(g):
            if _grad_enabled():
                return _conv_transpose3d_backward_graph(g, x, w, bias is not None, batched, pads, size, s, d, k,
                                                        groups, rx, rw, rb)
            g5 = _compute(g._data if batched else g._data[None])
            gpad = _pad_nd(g5, pads)
            gx = gw = gb = None
            if rx:
                gxa = conv3d_forward_array(gpad, w5, s, d, groups)
                gxa = gxa[(slice(None), slice(None)) + tuple(slice(0, n) for n in size)]
                gxa = _xp(gxa).ascontiguousarray(gxa).astype(xd.dtype, copy=False)
                gx = _wrap(gxa if batched else gxa[0])
            if rw:
                # conv's weight gradient with the roles swapped: g is the (padded) input, x the output gradient.
                gw = _wrap(conv3d_weight_grad_array(gpad, x5, k, s, d, groups).astype(w._data.dtype, copy=False))
            if rb:
                gb = _wrap(g5.sum(axis=(0, 2, 3, 4)).astype(bias._data.dtype, copy=False))
            return (gx, gw) if bias is None else (gx, gw, gb)
        inputs = (x, w) if bias is None else (x, w, bias)
        record("ConvolutionBackward0", conv_transpose3d_backward, out, inputs, (x, w))
    return out


def _conv_transpose3d_backward_graph(g, x, w, has_bias, batched, pads, size, s, d, k, groups, rx, rw, rb):
    from .nn import pad
    g5 = g if batched else g.unsqueeze(0)
    gpad = pad(g5, [v for a, b in reversed(pads) for v in (a, b)]) if any(a for a, _ in pads) else g5
    gx = gw = gb = None
    if rx:
        gx = _conv3d(gpad, w, None, s, 0, d, groups)[(slice(None), slice(None)) + tuple(slice(0, n) for n in size)]
        gx = gx if batched else gx.squeeze(0)
    if rw:
        gw = _weight_grad_graph(gpad, x if batched else x.unsqueeze(0), k, s, d, groups)
    if rb:
        gb = g5.sum((0, 2, 3, 4))
    return (gx, gw, gb) if has_bias else (gx, gw)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """3d cross-correlation of (N, C, D, H, W) input with (O, C/groups, kd, kh, kw) weight."""
    return _conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The adjoint of conv3d (a "deconvolution"): (N, Cin, D, H, W) with (Cin, Cout/groups, kd, kh, kw) weight."""
    return _conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups, dilation)


__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
