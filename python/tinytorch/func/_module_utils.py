"""torch.func's helpers for modules and tensors: replace_all_batch_norm_modules_ and debug_unwrap."""
from __future__ import annotations

from typing import Any

__all__ = ["replace_all_batch_norm_modules_", "debug_unwrap"]


def replace_all_batch_norm_modules_(root: Any) -> Any:
    """Make every BatchNorm in `root` use batch statistics only (no running stats), in place, so that vmap over a
    model does not try to update running buffers shared by all examples; returns root."""
    from ..nn.modules.batchnorm import _BatchNorm
    for module in root.modules():
        if isinstance(module, _BatchNorm) and module.track_running_stats:
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root


def debug_unwrap(tensor: Any, *, recurse: bool = True) -> Any:
    """The tensor itself: tinytorch's transforms pass plain tensors to the function, never wrappers."""
    return tensor
