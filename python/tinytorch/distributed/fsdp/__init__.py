"""tinytorch.distributed.fsdp: fully_shard (PyTorch's FSDP2) — ZeRO-3, and ZeRO-2 with reshard_after_forward=False."""
from ._api import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy  # noqa: F401
from ._fully_shard import FSDPModule, UnshardHandle, fully_shard, register_fsdp_forward_method  # noqa: F401

__all__ = ["fully_shard", "FSDPModule", "UnshardHandle", "register_fsdp_forward_method", "MixedPrecisionPolicy",
           "OffloadPolicy", "CPUOffloadPolicy"]
