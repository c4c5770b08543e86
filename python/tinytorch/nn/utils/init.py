"""skip_init: build a module without running its parameter initialisation (PyTorch's nn.utils.skip_init)."""
from __future__ import annotations

import inspect


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) with uninitialised parameters: built on the meta device (its initialisation then
    computes nothing) and given empty memory on kwargs' device (cpu by default)."""
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    kwargs["device"] = "meta"
    return module_cls(*args, **kwargs).to_empty(device=final_device)
