"""Built-in DDP communication hooks (PyTorch's torch.distributed.algorithms.ddp_comm_hooks)."""
from . import default_hooks  # noqa: F401
from .default_hooks import allreduce_hook, bf16_compress_hook, fp16_compress_hook  # noqa: F401

__all__ = ["default_hooks", "allreduce_hook", "fp16_compress_hook", "bf16_compress_hook"]
