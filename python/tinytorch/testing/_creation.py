"""torch.testing.make_tensor: a random tensor of a given shape, dtype and device for tests."""
from __future__ import annotations

import collections.abc
import math
import warnings

import numpy as np

import tinytorch
from .._tensor import Tensor

__all__ = ["make_tensor"]

_INTEGRAL_TYPES = (tinytorch.uint8, tinytorch.int8, tinytorch.int16, tinytorch.int32, tinytorch.int64)
_FLOATING_TYPES = (tinytorch.float16, tinytorch.bfloat16, tinytorch.float32, tinytorch.float64)
_COMPLEX_TYPES = (tinytorch.complex64, tinytorch.complex128)


def _uniform(shape: tuple, dtype, device, low: float, high: float) -> Tensor:
    t = tinytorch.empty(shape, dtype=dtype, device=device)
    # uniform_ needs high - low to be finite: sample half the range and double it
    if high - low >= float(np.finfo(dtype.np).max):
        return t.uniform_(low / 2, high / 2).mul_(2)
    return t.uniform_(low, high)


def make_tensor(*shape, dtype, device, low: float | None = None, high: float | None = None,
                requires_grad: bool = False, noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format=None) -> Tensor:
    """A tensor of `shape` with values drawn uniformly from [low, high): by default [-9, 9) for floating and
    complex dtypes (real and imaginary parts), [-9, 10) for signed integers, [0, 10) for uint8, and {0, 1}
    for bool. Bounds outside the dtype's range are clamped to it."""
    def modify_low_high(low, high, *, lowest_inclusive, highest_exclusive, default_low, default_high):
        low = low if low is not None else default_low
        high = high if high is not None else default_high
        if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
            raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
        if low == high and dtype in _FLOATING_TYPES + _COMPLEX_TYPES:
            warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or complex types is "
                          "deprecated since 2.1 and will be removed in 2.3. Use `torch.full(...)` instead.",
                          FutureWarning, stacklevel=3)
        elif low >= high:
            raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
        elif high < lowest_inclusive or low >= highest_exclusive:
            raise ValueError(f"The value interval specified by `low` and `high` is [{low}, {high}), but {dtype} "
                             f"only supports [{lowest_inclusive}, {highest_exclusive})")
        low = min(max(low, lowest_inclusive), highest_exclusive)
        high = min(max(high, lowest_inclusive), highest_exclusive)
        if dtype is tinytorch.bool or dtype in _INTEGRAL_TYPES:
            # randint's high is exclusive: ceil both so that no value falls below low
            return math.ceil(low), math.ceil(high)
        return low, high

    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually exclusive, but got "
                         f"noncontiguous={noncontiguous} and memory_format={memory_format}")
    if requires_grad and (dtype is tinytorch.bool or dtype in _INTEGRAL_TYPES):
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral dtypes, but got "
                         f"dtype={dtype}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        # twice the last dim, then every other element: non-contiguous, and offset by one
        shape = (*shape[:-1], 2 * shape[-1])

    if dtype is tinytorch.bool:
        low, high = modify_low_high(low, high, lowest_inclusive=0, highest_exclusive=2, default_low=0,
                                    default_high=2)
        result = tinytorch.randint(low, high, shape, device=device, dtype=dtype)
    elif dtype in _INTEGRAL_TYPES:
        info = np.iinfo(dtype.np)
        # randint draws in int64, which cannot hold int64's max + 1
        low, high = modify_low_high(low, high, lowest_inclusive=int(info.min),
                                    highest_exclusive=int(info.max) + (1 if dtype is not tinytorch.int64 else 0),
                                    default_low=-9, default_high=10)
        result = tinytorch.randint(low, high, shape, device=device, dtype=dtype)
    elif dtype in _FLOATING_TYPES + _COMPLEX_TYPES:
        part = dtype.to_real() if dtype in _COMPLEX_TYPES else dtype
        info = np.finfo(part.np)
        low, high = modify_low_high(low, high, lowest_inclusive=float(info.min), highest_exclusive=float(info.max),
                                    default_low=-9, default_high=9)
        if dtype in _COMPLEX_TYPES:
            result = tinytorch.complex(_uniform(shape, part, device, low, high),
                                       _uniform(shape, part, device, low, high))
        else:
            result = _uniform(shape, dtype, device, low, high)
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by torch.testing.make_tensor(). "
                        "To request support, file an issue at: https://github.com/pytorch/pytorch/issues")

    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        if dtype is tinytorch.bool or dtype in _INTEGRAL_TYPES:
            replacement = 1
        else:
            tiny = float(np.finfo((dtype.to_real() if dtype in _COMPLEX_TYPES else dtype).np).tiny)
            replacement = complex(tiny, tiny) if dtype in _COMPLEX_TYPES else tiny
        result[result == 0] = replacement
    if dtype in _FLOATING_TYPES + _COMPLEX_TYPES:
        result.requires_grad = requires_grad
    return result
