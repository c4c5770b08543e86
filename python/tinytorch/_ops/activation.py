"""The activations beyond the everyday ones (hardswish, mish, selu, glu, prelu, shrinks, ...), forward and
derivative together.

Each forward runs on the input's array in a few NumPy/CuPy passes and records one node. Its backward is a few
in-place array passes, or under create_graph the same derivative written with tensor ops, so that double
backward sees how it depends on the input. Selecting on a data-dependent mask is slow (NumPy's where and the
intra-op pool's alike), so most use mask arithmetic instead.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .._tensor import Tensor, _wrap_dim
from ._common import _grad_enabled, _short, attach, float_data, inplace_unary, needs_grad, record, sum_to
from . import _cpu, pointwise as _pw
from .nn import _compute, _xp, dropout, softmax
from .shape import cat
from ._common import user_stacklevel as _user_stacklevel

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_FLOAT_KINDS = ("f", "V")  # "V": ml_dtypes' bfloat16


def _float_array(x: Tensor, kernel: str):
    """x's array for an op PyTorch implements for floating types only (its NotImplementedError otherwise)."""
    d = x._data
    if d.dtype.kind not in _FLOAT_KINDS:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_short(d.dtype)}\'')
    return d


def _select(cond, a, b):
    """cond ? a : b for a Python number a, in b's dtype; on the intra-op pool for large float arrays."""
    r = _cpu.where(cond, a, b) if type(cond) is np.ndarray else None
    return _xp(b).where(cond, b.dtype.type(a), b) if r is None else r


def _on_array(fn, c, *args):
    """fn(c, *args) for an array c; a 0-d c is passed as one element, since NumPy turns 0-d arithmetic into
    scalars that the in-place steps (out=) can't write to."""
    if c.ndim == 0:
        return fn(c.reshape(1), *(a.reshape(1) if getattr(a, "ndim", None) == 0 else a for a in args)).reshape(())
    return fn(c, *args)


def _leaky(c, slope):
    """c where c > 0, else slope * c: the sum of the two one-sided parts (each is 0 on the other side), which
    needs no select; NaN stays NaN."""
    xp = _xp(c)
    neg = xp.minimum(c, 0)
    neg *= slope
    neg += xp.maximum(c, 0)
    return neg


def _pointwise(x: Tensor, kernel: str, forward, node: str, derivative, fast, cpu_op: int | None = None) -> Tensor:
    """out = forward(array) for a float-only elementwise op (halves computed in float32, as PyTorch's CPU
    kernels do), recording `node`. Its backward is fast(g, x) on arrays, in a few in-place passes, or under
    create_graph derivative(g, x) in tensor ops, so that double backward sees how it depends on x. With cpu_op,
    large float32/float64 arrays take one C++ pass each way instead (_cpu.activation)."""
    d = _float_array(x, kernel)
    y = _cpu.activation(cpu_op, d) if cpu_op is not None and type(d) is np.ndarray else None
    if y is None:
        y = _on_array(forward, _compute(d)).astype(d.dtype, copy=False)
    out = _pw._result(y)
    if needs_grad(x):
        def backward(g):
            if _grad_enabled():
                return derivative(g, x)
            if cpu_op is not None and type(g._data) is np.ndarray:
                r = _cpu.activation_backward(cpu_op, g._data, x._data)
                if r is not None:
                    return _pw._result(r)
            r = _on_array(fast, _compute(g._data), _compute(x._data))
            return _pw._result(r.astype(x._data.dtype, copy=False))
        record(node, backward, out, (x,), (x,))
    return out


# ------------------------------------------------------------------ hard sigmoid / swish, mish


def _hardswish(input: Tensor) -> Tensor:
    def forward(c):
        t = c + 3
        _xp(c).clip(t, 0, 6, out=t)
        t *= c
        t /= 6
        return t
    def fast(g, c):
        s = c / 3
        s += 0.5
        mid = c > -3
        mid &= c < 3
        s *= mid
        s += c >= 3
        s *= g
        return s
    return _pointwise(input, "hardswish_cpu", forward, "HardswishBackward0",
                      lambda g, x: _pw.where(x >= 3.0, g, _pw.where(x <= -3.0, 0.0, g * (x / 3.0 + 0.5))), fast,
                      _cpu.HARDSWISH)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6 (MobileNetV3's cheap swish)."""
    return inplace_unary(input, _hardswish) if inplace else _hardswish(input)


def _hardsigmoid(input: Tensor) -> Tensor:
    def forward(c):
        t = c + 3
        _xp(c).clip(t, 0, 6, out=t)
        t /= 6
        return t
    def fast(g, c):
        inside = c > -3
        inside &= c < 3
        r = g * inside
        r *= 1.0 / 6
        return r
    return _pointwise(input, "hardsigmoid_cpu", forward, "HardsigmoidBackward0",
                      lambda g, x: _pw.where((x > -3.0) & (x < 3.0), g * (1.0 / 6), 0.0), fast, _cpu.HARDSIGMOID)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6, a piecewise-linear sigmoid."""
    return inplace_unary(input, _hardsigmoid) if inplace else _hardsigmoid(input)


# tanh(softplus(x)) = n / (n + 2) with n = e^x (e^x + 2): one exp and no overflow, since above x = 20 the
# ratio is 1 to float64 precision and exp's argument is capped there.
_MISH_CAP = 20.0


def _mish_forward(c):
    xp = _xp(c)
    n = xp.exp(xp.minimum(c, _MISH_CAP))
    n *= n + 2
    t = n + 2
    xp.divide(n, t, out=t)
    t *= c
    return t


def _mish_grad(g: Tensor, x: Tensor) -> Tensor:
    e = x.clamp(max=_MISH_CAP).exp()
    n = e * (e + 2)
    m = n + 2
    # d/dx x tanh(sp(x)) = tanh(sp(x)) + x sigmoid(x) (1 - tanh(sp(x))^2), with 1 - t^2 = 4 (n + 1) / (n + 2)^2
    return g * (n / m + x * x.sigmoid() * ((n + 1) * 4) / (m * m))


def _mish_fast(g, c):
    xp = _xp(c)
    n = xp.exp(xp.minimum(c, _MISH_CAP))
    n *= n + 2
    m = n + 2
    t = n / m
    with np.errstate(over="ignore"):  # exp(-x) = inf gives sigmoid(x) = 0, rightly
        sg = xp.exp(-c)
    sg += 1
    xp.divide(c, sg, out=sg)  # x sigmoid(x)
    n += 1
    n *= 4
    m *= m
    n /= m  # 1 - t^2
    n *= sg
    n += t
    n *= g
    return n


def _mish(input: Tensor) -> Tensor:
    return _pointwise(input, "mish_cpu", _mish_forward, "MishBackward0", _mish_grad, _mish_fast, _cpu.MISH)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return inplace_unary(input, _mish) if inplace else _mish(input)


# ------------------------------------------------------------------ selu, celu (PyTorch's elu kernel)


def _elu_like(input: Tensor, node: str, alpha: float, scale: float, input_scale: float) -> Tensor:
    """scale * x for x > 0, else alpha * scale * expm1(input_scale * x)."""
    negcoef = alpha * scale

    def forward(c):
        xp = _xp(c)
        neg = xp.minimum(c, 0)
        if input_scale != 1.0:
            neg *= input_scale
        xp.expm1(neg, out=neg)
        neg *= negcoef
        pos = xp.maximum(c, 0)
        if scale != 1.0:
            pos *= scale
        neg += pos
        return neg

    def derivative(g, x):
        z = x.clamp(max=0.0)
        neg = g * (z * input_scale if input_scale != 1.0 else z).exp() * (negcoef * input_scale)
        return _pw.where(x > 0, g * scale if scale != 1.0 else g, neg)

    def fast(g, c):
        xp = _xp(c)
        neg = xp.minimum(c, 0)
        if input_scale != 1.0:
            neg *= input_scale
        xp.exp(neg, out=neg)
        neg *= negcoef * input_scale
        pos = c > 0
        neg *= ~pos
        neg += pos * c.dtype.type(scale) if scale != 1.0 else pos
        neg *= g
        return neg
    return _pointwise(input, "elu_cpu", forward, node, derivative, fast)


# The in-place forms of elu, celu, threshold and rrelu record PyTorch's "...Backward1" nodes.
def _selu(input: Tensor, node: str = "EluBackward0") -> Tensor:
    return _elu_like(input, node, _SELU_ALPHA, _SELU_SCALE, 1.0)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with SELU's self-normalising constants."""
    return inplace_unary(input, _selu, "EluBackward1") if inplace else _selu(input)


def selu_(input: Tensor) -> Tensor:
    """In-place selu."""
    return selu(input, inplace=True)


def _celu(input: Tensor, alpha: float, node: str = "CeluBackward0") -> Tensor:
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _elu_like(input, node, alpha, 1.0, 1.0 / alpha)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    return inplace_unary(input, _celu, alpha, "CeluBackward1") if inplace else _celu(input, alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place celu."""
    return celu(input, alpha, inplace=True)


# ------------------------------------------------------------------ glu, softsign, tanhshrink


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b), where a and b are the two halves of input along dim."""
    d = input._data
    if d.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    dim = _wrap_dim(dim, d.ndim)
    if d.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {d.shape[dim]}")
    _float_array(input, "glu_cpu")
    h = d.shape[dim] // 2
    c = _compute(d)
    lead = (slice(None),) * dim
    xp = _xp(c)
    with np.errstate(over="ignore"):
        s = xp.exp(-c[lead + (slice(h, None),)])
    s += 1
    y = xp.divide(c[lead + (slice(0, h),)], s, out=s)
    out = _pw._result(y.astype(d.dtype, copy=False))
    if needs_grad(input):
        x = input

        def glu_backward(g):
            a, s = x.narrow(dim, 0, h), x.narrow(dim, h, h).sigmoid()
            ga = g * s
            return cat([ga, ga * a * (1 - s)], dim)
        record("GluBackward0", glu_backward, out, (x,), (x,))
    return out


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    d = input._data
    if d.dtype.kind == "b":
        raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
    if d.dtype.kind == "c":
        return input / (input.abs() + 1)

    def forward(c):
        t = _xp(c).abs(c)
        t += 1
        _xp(c).divide(c, t, out=t)
        return t

    def derivative(g, x):
        t = x.abs() + 1
        return g / (t * t)

    def fast(g, c):
        t = _xp(c).abs(c)
        t += 1
        t *= t
        return _xp(c).divide(g, t, out=t)
    # PyTorch composes softsign as x / (1 + |x|): its node is the division's
    return _pointwise(_floating(input), "softsign", forward, "DivBackward0", derivative, fast)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    d = input._data
    if d.dtype.kind == "b":
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    if d.dtype.kind == "c":
        return input - input.tanh()

    def forward(c):
        t = _xp(c).tanh(c)
        _xp(c).subtract(c, t, out=t)
        return t

    def derivative(g, x):
        t = x.tanh()
        return g * (t * t)

    def fast(g, c):
        t = _xp(c).tanh(c)
        t *= t
        t *= g
        return t
    # PyTorch composes tanhshrink as x - tanh(x): its node is the subtraction's
    return _pointwise(_floating(input), "tanhshrink", forward, "SubBackward0", derivative, fast)


def _floating(x: Tensor) -> Tensor:
    """x, or x as the default float dtype when it is an integer tensor (the int -> float promotion of / and tanh).
    The cast happens outside the graph: an integer tensor never requires grad."""
    d = x._data
    return x if d.dtype.kind in _FLOAT_KINDS else _pw._result(float_data(x))


# ------------------------------------------------------------------ shrinks, threshold


def _shrink_fast(lambd: float):
    """The shrinks' gradient: g, but 0 where -lambd <= x <= lambd (NaN passes g, as in PyTorch)."""
    def fast(g, c):
        outside = _xp(c).abs(c) <= lambd
        _xp(c).logical_not(outside, out=outside)  # so that NaN counts as outside
        return g * outside
    return fast


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    d = _float_array(input, "softshrink_check")
    if not lambd >= 0:
        if d.dtype.kind == "V":
            import ml_dtypes
            top = float(ml_dtypes.finfo(d.dtype).max)
        else:
            top = float(np.finfo(d.dtype).max)
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype {_short(d.dtype)}, "
                           f"but found {lambd:g}")

    def forward(c):
        return c - _xp(c).clip(c, -lambd, lambd)
    return _pointwise(input, "softshrink_cpu", forward, "SoftshrinkBackward0",
                      lambda g, x: g.masked_fill(x.abs() <= lambd, 0.0), _shrink_fast(lambd))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0."""
    def forward(c):
        y = c * (_xp(c).abs(c) > lambd)  # keeps NaN, as PyTorch does
        y += 0.0  # -x * 0 is -0.0: PyTorch's zeros are +0.0
        return y
    return _pointwise(input, "hardshrink_cpu", forward, "HardshrinkBackward0",
                      lambda g, x: g.masked_fill(x.abs() <= lambd, 0.0), _shrink_fast(lambd))


def _threshold(input: Tensor, threshold: float, value: float, node: str = "ThresholdBackward0") -> Tensor:
    d = input._data
    if d.dtype.kind == "b":
        raise NotImplementedError("\"threshold_cpu\" not implemented for 'Bool'")
    # The threshold is cast to the compute dtype first, as PyTorch's kernel does (-0.5 is 0 for ints; halves
    # compare in float32).
    c = _compute(d) if d.dtype.kind in _FLOAT_KINDS else d
    mask = c <= c.dtype.type(threshold)
    out = _pw._result(_select(mask, d.dtype.type(value).item(), d))
    if needs_grad(input):
        m = _pw._result(mask)

        def threshold_backward(g):
            if _grad_enabled():
                return g.masked_fill(m, 0.0)
            return _pw._result(g._data * ~mask)  # mask arithmetic: selecting on a random mask is slow
        record(node, threshold_backward, out, (input,))
    return out


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else value."""
    if inplace:
        return inplace_unary(input, _threshold, threshold, value, "ThresholdBackward1")
    return _threshold(input, threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place threshold."""
    return inplace_unary(input, _threshold, threshold, value, "ThresholdBackward1")


def _hardtanh(input: Tensor, min_val: float, max_val: float) -> Tensor:
    """x clamped to [min_val, max_val] (bounds cast to the input's dtype first, min applied before max); the
    gradient passes only strictly inside the bounds, and at NaN."""
    d = input._data
    if d.dtype.kind == "b":
        raise RuntimeError("Bool inputs not supported for hardtanh")
    c = _compute(d) if d.dtype.kind in _FLOAT_KINDS else d
    lo, hi = c.dtype.type(min_val), c.dtype.type(max_val)
    xp = _xp(c)
    fused = _cpu.clamp(c, float(lo), float(hi)) if c is d else None  # one pass on the pool (ReLU6 nets)
    out = _pw._result(fused if fused is not None else xp.minimum(xp.maximum(c, lo), hi).astype(d.dtype, copy=False))
    if needs_grad(input):
        def hardtanh_backward(g):
            if not _grad_enabled() and fused is not None and type(g._data) is np.ndarray:
                gx = _cpu.activation_backward(_cpu.HARDTANH, g._data, input._data, float(lo), float(hi))
                if gx is not None:  # one pass on the pool: g inside the bounds, 0 at and beyond them
                    return _pw._result(gx)
            x = _compute(input._data)
            stop = (x <= lo) | (x >= hi)
            if _grad_enabled():
                return g.masked_fill(_pw._result(stop), 0.0)
            return _pw._result(g._data * ~stop)
        record("HardtanhBackward0", hardtanh_backward, out, (input,), (input,))
    return out


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val], with PyTorch's HardtanhBackward0 (no gradient at the bounds)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return inplace_unary(input, _hardtanh, min_val, max_val) if inplace else _hardtanh(input, min_val, max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place hardtanh (unlike F.hardtanh, PyTorch's in-place kernel takes min_val > max_val: all max_val)."""
    return inplace_unary(input, _hardtanh, min_val, max_val)


# ------------------------------------------------------------------ prelu, rrelu


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight * x, with one weight per channel (dim 1) or one shared."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"prelu(): argument 'weight' (position 2) must be Tensor, not {type(weight).__name__}")
    d, w = input._data, weight._data
    if d.dtype != w.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {_short(d.dtype)} and {_short(w.dtype)}")
    if w.size != 1:
        if d.ndim == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = d.shape[1] if d.ndim > 1 else 1
        if channels != w.size:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{w.size} and channel size = {channels}.")
    if w.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {w.ndim}")
    _float_array(input, "prelu_cpu")
    # The weight as it broadcasts: one value, or (C, 1, ..., 1) against (N, C, ...).
    wshape = () if w.size == 1 else (w.size,) + (1,) * (d.ndim - 2)
    wb = w.reshape(wshape)
    out = _pw._result(_leaky(d, wb))
    if needs_grad(input, weight):
        x, rx, rw = input, input._requires_grad, weight._requires_grad

        def prelu_backward(g):
            pos = x > 0
            wt = weight.reshape(wshape)
            gx = _pw.where(pos, g, g * wt) if rx else None
            gw = sum_to(_pw.where(pos, 0.0, g * x), wshape).reshape(weight.shape) if rw else None
            return gx, gw
        record("PreluKernelBackward0", prelu_backward, out, (x, weight), (x, weight))
    return out


def _check_rrelu_bounds(lower: float, upper: float) -> None:
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")


def _rrelu_eval_fast(slope: float):
    """Leaky ReLU's gradient: g where x > 0, else slope * g."""
    def fast(g, c):
        s = (c <= 0) * c.dtype.type(slope)
        s += c > 0
        s *= g
        return s
    return fast


def _rrelu(input: Tensor, lower: float, upper: float, training: bool, node: str = "RreluWithNoiseBackward0"
           ) -> Tensor:
    _check_rrelu_bounds(lower, upper)
    slope = (lower + upper) / 2
    if not training:
        return _pointwise(input, "leaky_relu_cpu", lambda c: _leaky(c, slope), node,
                          lambda g, x: _pw.where(x > 0, g, g * slope), _rrelu_eval_fast(slope))
    from .._creation import _generator_for
    from .._device import cuda_context
    d = _float_array(input, "rrelu_with_noise_out_cpu")
    c = _compute(d)
    with cuda_context(input.device):
        u = _generator_for(input.device, None).random(c.shape, dtype=c.dtype)
    # noise: a slope drawn from U(lower, upper) where x <= 0, else 1; the output is x * noise
    u *= upper - lower
    u += lower
    neg = c <= 0
    noise = u * neg
    noise += ~neg
    out = _pw._result((c * noise).astype(d.dtype, copy=False))
    if needs_grad(input):
        if upper - lower > 1e-6:
            n = _pw._result(noise.astype(d.dtype, copy=False))
            record(node, lambda g: g * n, out, (input,))
        else:
            x = input
            record(node, lambda g: _pw.where(x > 0, g, g * slope), out, (x,), (x,))
    return out


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU: slope drawn from U(lower, upper) per negative element in training, else their mean."""
    if inplace:
        return inplace_unary(input, _rrelu, lower, upper, training, "RreluWithNoiseBackward1")
    return _rrelu(input, lower, upper, training)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """In-place rrelu."""
    return rrelu(input, lower, upper, training, inplace=True)


# ------------------------------------------------------------------ gumbel softmax, feature alpha dropout


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """softmax((logits + Gumbel noise) / tau); with hard=True the one-hot argmax, with the soft sample's gradient."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=_user_stacklevel())
    if logits._data.dtype.kind not in _FLOAT_KINDS:
        raise RuntimeError("Exponential distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {_short(logits._data.dtype)}")
    from .._creation import empty_like, zeros_like
    gumbels = -empty_like(logits).exponential_().log()  # ~Gumbel(0, 1)
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft  # straight-through estimator


_ALPHA = _SELU_ALPHA * _SELU_SCALE  # SELU's negative saturation value, negated


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Alpha dropout of whole channels: dropped (sample, channel) maps are set to SELU's saturation, and
    everything is rescaled to keep zero mean and unit variance."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    d = input._data
    if p == 0.0 or not training or d.size == 0:
        return input
    if p == 1.0:
        zero = _pw._result(_xp(d).zeros((), d.dtype))
        return input.mul_(zero) if inplace else input * zero
    if d.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    from .._creation import ones
    shape = d.shape[:2] + (1,) * (d.ndim - 2)
    keep = dropout(ones(shape, device=input.device), p, True)._data != 0
    xp = _xp(d)
    a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
    # kept: x * a + alpha * a * p; dropped: alpha * a * (p - 1) (PyTorch's noise * a and (noise - 1) * alpha * a + b)
    scale = _pw._result(xp.where(keep, a, 0.0).astype(d.dtype))
    shift = _pw._result(xp.where(keep, _ALPHA * a * p, _ALPHA * a * (p - 1)).astype(d.dtype))
    return input.mul_(scale).add_(shift) if inplace else input * scale + shift


# ------------------------------------------------------------------ channel shuffle


def _shuffle(input: Tensor, groups: int) -> Tensor:
    d = input._data
    n, c = d.shape[0], d.shape[1]
    rest = d.shape[2:]
    y = d.reshape((n, groups, c // groups) + rest).swapaxes(1, 2)
    out = _pw._result(_xp(d).ascontiguousarray(y).reshape(d.shape))
    if needs_grad(input):
        # the inverse permutation is the shuffle with c / groups groups
        record("ChannelShuffleBackward0", lambda g: _shuffle(g, c // groups), out, (input,))
    return out


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Split the C channels of (N, C, *) input into groups and interleave them: (N, g, C/g, *) -> (N, C/g, g, *)."""
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"channel_shuffle(): argument 'groups' (position 2) must be int, not {type(groups).__name__}")
    d = input._data
    if d.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(d.shape)}")
    c = d.shape[1]
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    if c == 0:
        return input.clone()
    return _shuffle(input, int(groups))


def native_channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """channel_shuffle (PyTorch's native kernel entry point)."""
    return channel_shuffle(input, groups)


attach(hardshrink=hardshrink, prelu=prelu)

__all__ = ["hardswish", "hardsigmoid", "mish", "selu", "selu_", "celu", "celu_", "glu", "softsign", "tanhshrink",
           "softshrink", "hardshrink", "threshold", "threshold_", "hardtanh", "hardtanh_", "prelu", "rrelu", "rrelu_",
           "gumbel_softmax", "feature_alpha_dropout", "channel_shuffle", "native_channel_shuffle"]
