"""The configuration classes of PyTorch's FullyShardedDataParallel (FSDP1): names, members and defaults as in
torch.distributed.fsdp.api. tinytorch's FSDP1 maps them onto fully_shard (fully_sharded_data_parallel.py)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import Any, Optional, Sequence

__all__ = ["ShardingStrategy", "BackwardPrefetch", "CPUOffload", "MixedPrecision"]


class ShardingStrategy(Enum):
    """FULL_SHARD: ZeRO-3. SHARD_GRAD_OP: ZeRO-2 (parameters stay gathered between forward and backward).
    NO_SHARD: plain data parallel. HYBRID_SHARD / _HYBRID_SHARD_ZERO2: ZeRO-3 / ZeRO-2 inside a shard group,
    replicated across groups (a 2-d device mesh: (replicate, shard))."""

    FULL_SHARD = auto()
    SHARD_GRAD_OP = auto()
    NO_SHARD = auto()
    HYBRID_SHARD = auto()
    _HYBRID_SHARD_ZERO2 = auto()


class BackwardPrefetch(Enum):
    """When the next group's all-gather is issued in backward; tinytorch's fully_shard has one prefetch order
    (the reverse of forward's), so both are accepted and behave alike."""

    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()


@dataclass
class CPUOffload:
    """offload_params=True keeps the sharded parameters (and so their gradients and optimizer state) on the host."""

    offload_params: bool = False


@dataclass
class MixedPrecision:
    """param_dtype: compute and all-gather dtype; reduce_dtype: gradient reduction dtype (defaults to param_dtype);
    buffer_dtype: buffers are cast to it once, at wrapping; cast_forward_inputs: floating-point forward inputs are
    cast to param_dtype."""

    param_dtype: Optional[Any] = None
    reduce_dtype: Optional[Any] = None
    buffer_dtype: Optional[Any] = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True
    _module_classes_to_ignore: Sequence[type] = ()
