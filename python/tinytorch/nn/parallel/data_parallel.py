"""nn.DataParallel: PyTorch's single-process multi-GPU wrapper. Here it runs the module on one device (the
first of device_ids, or the CPU without CUDA), as PyTorch does with one GPU or none: replicating a model over
several GPUs in one process is what DistributedDataParallel does here, one process per GPU."""
from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence

from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


def _to(obj: Any, device) -> Any:
    from ..._tensor import Tensor
    if isinstance(obj, Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        moved = [_to(o, device) for o in obj]
        return type(obj)(*moved) if hasattr(obj, "_fields") else type(obj)(moved)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    return obj


def _devices(device_ids: Optional[Sequence]) -> list:
    from ... import cuda
    from ..._device import device as Device
    if not cuda.is_available():
        return []
    ids = list(range(cuda.device_count())) if device_ids is None else list(device_ids)
    return [i if isinstance(i, int) else (Device(i).index or 0) for i in ids]


class DataParallel(Module):
    """Wraps `module` (as `self.module`, so state_dict keys start with 'module.') and calls it on the inputs,
    moved to device_ids[0] when CUDA is available."""

    def __init__(self, module: Module, device_ids: Optional[Sequence] = None, output_device=None,
                 dim: int = 0) -> None:
        super().__init__()
        self.module = module
        self.dim = dim
        self.device_ids = _devices(device_ids)
        if not self.device_ids:
            self.output_device = None
            self.src_device_obj = None
            return
        if len(self.device_ids) > 1:
            warnings.warn(f"DataParallel runs the module on cuda:{self.device_ids[0]} only in tinytorch; use "
                          f"DistributedDataParallel (one process per GPU) to train on {len(self.device_ids)} GPUs")
        self.output_device = self.device_ids[0] if output_device is None else output_device
        from ..._device import device as Device
        self.src_device_obj = Device("cuda", self.device_ids[0])
        for t in list(module.parameters()) + list(module.buffers()):
            if t.device != self.src_device_obj:
                raise RuntimeError(f"module must have its parameters and buffers on device {self.src_device_obj} "
                                   f"(device_ids[0]) but found one of them on device: {t.device}")

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.src_device_obj is not None:
            inputs, kwargs = _to(inputs, self.src_device_obj), _to(kwargs, self.src_device_obj)
        return self.module(*inputs, **kwargs)


def data_parallel(module: Module, inputs: Any, device_ids: Optional[Sequence] = None, output_device=None,
                  dim: int = 0, module_kwargs: Optional[dict] = None) -> Any:
    """The functional DataParallel: module(*inputs, **module_kwargs) on device_ids[0] (or the CPU)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return DataParallel(module, device_ids, output_device, dim)(*inputs, **(module_kwargs or {}))
