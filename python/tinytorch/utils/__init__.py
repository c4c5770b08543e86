"""tinytorch.utils: data loading, checkpointing, hooks."""
from . import _pytree, benchmark, checkpoint, data, deterministic, hooks, model_zoo  # noqa: F401
