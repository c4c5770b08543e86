"""Activation checkpointing wrappers (PyTorch's torch.distributed.algorithms._checkpoint)."""
from .checkpoint_wrapper import (ActivationWrapper, CheckpointImpl, CheckpointWrapper, OffloadWrapper,
                                 apply_activation_checkpointing, checkpoint_wrapper, offload_wrapper)

__all__ = ["ActivationWrapper", "CheckpointImpl", "CheckpointWrapper", "OffloadWrapper",
           "apply_activation_checkpointing", "checkpoint_wrapper", "offload_wrapper"]
