"""The policies fully_shard takes: mixed precision and CPU offload (PyTorch's FSDP2 names and defaults)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["MixedPrecisionPolicy", "OffloadPolicy", "CPUOffloadPolicy"]


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """param_dtype: all-gather and compute dtype (the sharded fp32 parameters stay the optimizer's master copy);
    reduce_dtype: gradient reduce-scatter dtype (defaults to param_dtype); output_dtype: forward outputs are cast
    to it; cast_forward_inputs: floating-point forward inputs are cast to param_dtype."""

    param_dtype: Optional[Any] = None
    reduce_dtype: Optional[Any] = None
    output_dtype: Optional[Any] = None
    cast_forward_inputs: bool = True


@dataclass
class OffloadPolicy:
    """No offloading (the default): sharded parameters, gradients and optimizer state stay on the device."""


@dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """Sharded parameters, their gradients and so the optimizer state live on the host; each all-gather copies
    the shard to the device and each reduce-scatter's result comes back to the host. pin_memory is accepted."""

    pin_memory: bool = True
