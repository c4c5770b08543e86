"""tinytorch.utils: data loading, checkpointing, hooks."""
from . import _pytree, benchmark, checkpoint, data, hooks  # noqa: F401
