"""tinytorch.distributed: TCPStore, process groups and collectives (ring backend on CPU, NCCL on CUDA)."""
from .store import (  # noqa: F401
    DistError,
    DistNetworkError,
    DistStoreError,
    DistTimeoutError,
    PrefixStore,
    Store,
    TCPStore,
)
