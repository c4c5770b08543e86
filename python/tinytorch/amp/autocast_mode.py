"""torch.autocast: regions where PyTorch's autocast op lists pick each op's dtype (policy: tinytorch._autocast)."""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from .. import _autocast
from .._dtype import bfloat16, float16, float64


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast supports device_type ('cpu' and 'cuda' here)."""
    return device_type in _autocast.DEVICES


class autocast:
    """Context manager / decorator: ops inside run in the dtype PyTorch's autocast lists give them
    (matmul, linear, conv, attention in `dtype`; losses, softmax, norms... in float32 per device)."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled: bool | None = None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = device_type
        self.fast_dtype = _autocast.get_autocast_dtype(device_type) if dtype is None else dtype
        self._cache_enabled = _autocast.is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if enabled and device_type == "cuda":
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling")
                enabled = False
            elif self.fast_dtype is bfloat16 and not cuda.is_bf16_supported():
                raise RuntimeError("Current CUDA Device does not support bfloat16. Please switch dtype to float16.")
        if device_type == "cpu" and enabled and self.fast_dtype not in (bfloat16, float16):
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtype of torch.bfloat16, torch.float16 currently.")
            enabled = False
        if device_type == "cuda" and enabled and self.fast_dtype not in (bfloat16, float16):
            warnings.warn("In CUDA autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CUDA Autocast only supports dtypes of torch.float16, torch.bfloat16 currently.")
            enabled = False
        self._enabled = bool(enabled)

    def __enter__(self) -> None:
        self.prev_cache_enabled = _autocast.is_autocast_cache_enabled()
        self.prev = _autocast.is_autocast_enabled(self.device)
        self.prev_fastdtype = _autocast.get_autocast_dtype(self.device)
        _autocast.set_autocast_enabled(self.device, self._enabled)
        _autocast.set_autocast_dtype(self.device, self.fast_dtype)
        _autocast.autocast_increment_nesting()
        _autocast.set_autocast_cache_enabled(self._cache_enabled)

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        if _autocast.autocast_decrement_nesting() == 0:
            _autocast.clear_autocast_cache()
        _autocast.set_autocast_enabled(self.device, self.prev)
        _autocast.set_autocast_dtype(self.device, self.prev_fastdtype)
        _autocast.set_autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func: Callable) -> Callable:
        """Use as a decorator: func runs inside this region."""
        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        decorate_autocast.__script_unsupported = "@autocast() decorator is not supported in script mode"
        return decorate_autocast


def _cast(value, device_type: str, dtype):
    """value with its floating tensors (not float64) on device_type cast to dtype, through containers."""
    from .._tensor import Tensor
    if isinstance(value, Tensor):
        on_dev = value.device.type == device_type
        return value.to(dtype) if on_dev and value.is_floating_point() and value.dtype is not float64 else value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, dict):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd: Callable | None = None, *, device_type: str, cast_inputs=None) -> Callable:
    """Decorate a custom autograd Function's forward: it runs with the caller's autocast state, or, with
    cast_inputs, with autocast off and its floating inputs cast to cast_inputs."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = _autocast.get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = _autocast.is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_context = _autocast.is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
        return fwd(*args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str) -> Callable:
    """Decorate a custom autograd Function's backward: it runs with the autocast state its forward had."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd


__all__ = ["autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]
