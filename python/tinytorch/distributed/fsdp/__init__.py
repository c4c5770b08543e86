"""tinytorch.distributed.fsdp: fully_shard (PyTorch's FSDP2) — ZeRO-3, and ZeRO-2 with reshard_after_forward=False;
FullyShardedDataParallel (FSDP1's wrapper, built on fully_shard)."""
from ._api import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy  # noqa: F401
from ._fully_shard import FSDPModule, UnshardHandle, fully_shard, register_fsdp_forward_method  # noqa: F401
from .api import BackwardPrefetch, CPUOffload, MixedPrecision, ShardingStrategy  # noqa: F401
from .fully_sharded_data_parallel import FullyShardedDataParallel  # noqa: F401

__all__ = ["fully_shard", "FSDPModule", "UnshardHandle", "register_fsdp_forward_method", "MixedPrecisionPolicy",
           "OffloadPolicy", "CPUOffloadPolicy", "FullyShardedDataParallel", "ShardingStrategy", "BackwardPrefetch",
           "CPUOffload", "MixedPrecision"]
