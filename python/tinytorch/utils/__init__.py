"""tinytorch.utils: data loading, checkpointing, hooks."""
from . import checkpoint, data, hooks  # noqa: F401
