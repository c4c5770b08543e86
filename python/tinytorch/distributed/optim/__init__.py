"""tinytorch.distributed.optim: ZeroRedundancyOptimizer (optimizer state sharded across ranks, ZeRO-1)."""
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
