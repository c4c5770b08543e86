"""tinytorch.distributed.checkpoint (DCP): sharded checkpoints that load at any world size, and the state_dict
helpers for sharded models and their optimizers."""
from ._dcp import CheckpointException, FileSystemReader, FileSystemWriter, load, save  # noqa: F401
from . import state_dict  # noqa: F401

__all__ = ["save", "load", "FileSystemWriter", "FileSystemReader", "CheckpointException", "state_dict"]
