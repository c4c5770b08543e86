"""tinytorch.cpu.amp: PyTorch's deprecated CPU spellings of tinytorch.amp (each warns as PyTorch does)."""
from __future__ import annotations

import warnings

from ... import amp as _amp
from ..._dtype import bfloat16


class autocast(_amp.autocast):
    """Deprecated: tinytorch.amp.autocast('cpu', ...)."""

    def __init__(self, enabled: bool = True, dtype=bfloat16, cache_enabled: bool = True) -> None:
        warnings.warn("`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cpu', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """Deprecated: tinytorch.amp.GradScaler('cpu', ...)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        warnings.warn("`torch.cpu.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cpu', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)


__all__ = ["GradScaler", "autocast"]
