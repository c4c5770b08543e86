"""tinytorch.nn.parallel: DistributedDataParallel and its communication hooks; DataParallel (one device)."""
from . import comm_hooks  # noqa: F401
from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel
from .reducer import GradBucket

__all__ = ["DataParallel", "DistributedDataParallel", "GradBucket", "comm_hooks", "data_parallel"]
