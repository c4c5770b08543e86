"""torch.distributed._tensor: the older import path of torch.distributed.tensor (same objects, same modules)."""
import sys

from .. import tensor as _tensor
from ..tensor import (DeviceMesh, DTensor, Partial, Placement, Replicate, Shard, distribute_module,  # noqa: F401
                      distribute_tensor, empty, full, init_device_mesh, ones, rand, randn, zeros)
from ..tensor import _api as api, device_mesh, experimental, placement_types  # noqa: F401

for _name in ("api", "device_mesh", "experimental", "placement_types"):
    sys.modules[f"{__name__}.{_name}"] = getattr(_tensor, "_api" if _name == "api" else _name)

__all__ = ["DTensor", "DeviceMesh", "distribute_tensor", "distribute_module", "init_device_mesh", "Shard",
           "Replicate", "Partial", "Placement", "ones", "empty", "full", "rand", "randn", "zeros"]
