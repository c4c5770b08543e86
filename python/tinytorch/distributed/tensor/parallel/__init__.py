"""tinytorch.distributed.tensor.parallel: Megatron-style tensor and sequence parallelism (PyTorch's API)."""
from .api import parallelize_module
from .loss import loss_parallel
from .style import (ColwiseParallel, ParallelStyle, PrepareModuleInput, PrepareModuleInputOutput,
                    PrepareModuleOutput, RowwiseParallel, SequenceParallel)

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleInputOutput",
           "PrepareModuleOutput", "RowwiseParallel", "SequenceParallel", "parallelize_module", "loss_parallel"]
