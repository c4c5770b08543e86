"""tinytorch.utils: data loading, checkpointing, hooks."""
from . import checkpoint, hooks  # noqa: F401
