"""Parameter initialisation (torch.nn.init): every function fills its tensor in place, outside autograd.

Random draws come from the tensor's device generator (or `generator`); the streams differ from
PyTorch's, so the same seed gives the same distribution, not the same numbers.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .._creation import _generator_for
from .._device import cuda_context, cupy, move
from .._meta import MetaArray
from .._tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fill(tensor: Tensor, make) -> Tensor:
    """Write make(rng, shape, float_dtype) into tensor's array in place and record the write."""
    data = tensor._data
    if type(data) is MetaArray:  # nothing to fill: meta tensors hold no values
        return tensor
    work_dtype = data.dtype if data.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    with cuda_context(tensor.device):
        values = make(work_dtype)
        if type(values) is not type(data):  # a CPU generator used for a CUDA tensor, or the reverse
            values = move(values, tensor.device)
        data[...] = values
    tensor._bump_version()
    return tensor


def _rng(tensor: Tensor, generator):
    return _generator_for(tensor.device, generator)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with U(a, b)."""
    rng = _rng(tensor, generator)
    return _fill(tensor, lambda dt: rng.uniform(a, b, tensor._data.shape).astype(dt, copy=False))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with N(mean, std^2)."""
    rng = _rng(tensor, generator)

    def make(dt):
        x = rng.standard_normal(tensor._data.shape, dtype=dt)
        x *= std
        x += mean
        return x
    return _fill(tensor, make)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None) -> Tensor:
    """Fill with N(mean, std^2) truncated to [a, b] (values outside are redrawn)."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)
    if type(tensor._data) is MetaArray:
        return tensor
    rng = _rng(tensor, generator)
    shape = tensor._data.shape

    def make(dt):
        xp = np if tensor.is_cpu else cupy()
        x = rng.standard_normal(shape, dtype=dt) * std + mean
        # Rejection sampling gives the exact truncated law; after many rounds (a sliver of mass far in a
        # tail) the last stragglers are clamped rather than looping forever.
        for _ in range(100):
            bad = (x < a) | (x > b)
            n = int(bad.sum())
            if n == 0:
                break
            x[bad] = rng.standard_normal(n, dtype=dt) * std + mean
        return xp.clip(x, a, b)
    return _fill(tensor, make)


def _no_grad_trunc_normal_(tensor: Tensor, mean: float, std: float, a: float, b: float, generator=None) -> Tensor:
    """The name timm and older model files import trunc_normal_ under (it already fills without recording)."""
    return trunc_normal_(tensor, mean, std, a, b, generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with the value val."""
    tensor._data[...] = val
    tensor._bump_version()
    return tensor


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    data = tensor._data
    data[...] = 0
    n = min(data.shape)
    data[range(n), range(n)] = 1
    tensor._bump_version()
    return tensor


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    dimensions = tensor.dim()
    if dimensions < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    num_input_fmaps = tensor.size(1)
    num_output_fmaps = tensor.size(0)
    receptive_field_size = 1
    for s in tensor.shape[2:]:
        receptive_field_size *= s
    return num_input_fmaps * receptive_field_size, num_output_fmaps * receptive_field_size


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: N(0, gain^2 * 2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None) -> Tensor:
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None) -> Tensor:
    """He normal: N(0, gain^2 / fan)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix: Q of the QR decomposition of a Gaussian matrix, signs fixed by R's
    diagonal (Saxe et al.), times gain; dims after the first are flattened. Common for recurrent weights."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    rng = _rng(tensor, generator)

    def make(dt):
        flat = rng.standard_normal((rows, cols))
        xp = np if type(flat) is np.ndarray else __import__("cupy")
        if rows < cols:
            flat = flat.T
        q, r = xp.linalg.qr(flat)
        q = q * xp.sign(xp.diag(r))
        if rows < cols:
            q = q.T
        return (q * gain).reshape(tensor._data.shape).astype(dt, copy=False)
    return _fill(tensor, make)


__all__ += ["orthogonal_"]


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-D conv weight with the Dirac delta, so the conv passes its inputs through
    (per group of output channels when groups > 1)."""
    if tensor.dim() not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    data = tensor._data
    if type(data) is MetaArray:
        return tensor
    out_per_group = sizes[0] // groups
    centre = tuple(s // 2 for s in sizes[2:])
    data[...] = 0
    for g in range(groups):
        for d in range(min(out_per_group, sizes[1])):
            data[(g * out_per_group + d, d) + centre] = 1
    tensor._bump_version()
    return tensor


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """Fill a 2-D tensor with N(0, std^2) values, then zero ceil(sparsity * rows) random entries of each
    column (Martens 2010)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    if type(tensor._data) is MetaArray:
        return tensor
    from .._creation import randperm
    from ..autograd.grad_mode import no_grad
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    normal_(tensor, 0.0, std, generator)
    with no_grad():
        for col in range(cols):
            tensor[randperm(rows, generator=generator, device=tensor.device)[:num_zeros], col] = 0
    return tensor


def _make_deprecate(meth):
    """The pre-0.4 name without the trailing underscore: warns, then calls the in-place function."""
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.", FutureWarning,
                      stacklevel=2)
        return meth(*args, **kwargs)
    deprecated_init.__doc__ = f"Deprecated alias of {new_name}."
    deprecated_init.__name__ = old_name
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)

__all__ += ["dirac_", "sparse_"]
