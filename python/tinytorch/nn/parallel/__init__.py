"""tinytorch.nn.parallel: DistributedDataParallel and its communication hooks."""
from . import comm_hooks  # noqa: F401
from .distributed import DistributedDataParallel
from .reducer import GradBucket

__all__ = ["DistributedDataParallel", "GradBucket", "comm_hooks"]
