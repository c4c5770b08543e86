"""tinytorch.distributed.tensor: DTensor, placements and the functions that make DTensors (PyTorch's names)."""
from ... import _dispatch as _routing
from ._api import DTensor, _route_methods, distribute_module, distribute_tensor  # noqa: F401
from .placement_types import Partial, Placement, Replicate, Shard  # noqa: F401
from ..device_mesh import DeviceMesh, init_device_mesh  # noqa: F401
from . import _ops  # noqa: F401  (registers the sharding rules)
from ._dispatch import dispatch as _dispatch_op
from ._factories import empty, full, ones, rand, randn, zeros  # noqa: F401

_route_methods()
_routing.subclass = DTensor
_routing.handler = _dispatch_op

__all__ = ["DTensor", "distribute_tensor", "distribute_module", "Shard", "Replicate", "Partial", "Placement",
           "DeviceMesh", "init_device_mesh", "ones", "empty", "full", "rand", "randn", "zeros"]
