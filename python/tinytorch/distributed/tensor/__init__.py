"""tinytorch.distributed.tensor: DTensor, placements and the functions that make DTensors (PyTorch's names)."""
from ._api import DTensor, distribute_module, distribute_tensor  # noqa: F401
from .placement_types import Partial, Placement, Replicate, Shard  # noqa: F401
from ..device_mesh import DeviceMesh, init_device_mesh  # noqa: F401

__all__ = ["DTensor", "distribute_tensor", "distribute_module", "Shard", "Replicate", "Partial", "Placement",
           "DeviceMesh", "init_device_mesh"]
