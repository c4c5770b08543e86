"""DTensor factories (torch.distributed.tensor.ones/zeros/empty/full/rand/randn): each rank makes only its piece."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ... import _creation
from ..device_mesh import DeviceMesh
from ._api import DTensor, _default_mesh, _norm_placements
from ._redistribute import local_shape
from .placement_types import Placement

__all__ = ["empty", "full", "ones", "rand", "randn", "zeros"]


def _size(size: tuple) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def _make(fn: Any, size: tuple, device_mesh: Optional[DeviceMesh], placements: Optional[Sequence[Placement]],
          requires_grad: bool, dtype: Any, **kw: Any) -> DTensor:
    gshape = _size(size)
    mesh = _default_mesh(device_mesh, "cpu")
    placements = _norm_placements(placements, mesh, len(gshape))
    if any(p.is_partial() for p in placements):
        raise ValueError("DTensor factories make Shard or Replicate DTensors, not Partial ones")
    local = fn(local_shape(gshape, mesh, placements), dtype=dtype, device=mesh.device_type, **kw)
    return DTensor._make(local._data, mesh, placements, gshape, requires_grad)


def ones(*size: Any, requires_grad: bool = False, dtype: Any = None, layout: Any = None,
         device_mesh: Optional[DeviceMesh] = None, placements: Optional[Sequence[Placement]] = None) -> DTensor:
    """A DTensor of ones of global `size`."""
    return _make(_creation.ones, size, device_mesh, placements, requires_grad, dtype)


def zeros(*size: Any, requires_grad: bool = False, dtype: Any = None, layout: Any = None,
          device_mesh: Optional[DeviceMesh] = None, placements: Optional[Sequence[Placement]] = None) -> DTensor:
    """A DTensor of zeros of global `size`."""
    return _make(_creation.zeros, size, device_mesh, placements, requires_grad, dtype)


def empty(*size: Any, requires_grad: bool = False, dtype: Any = None, layout: Any = None,
          device_mesh: Optional[DeviceMesh] = None, placements: Optional[Sequence[Placement]] = None) -> DTensor:
    """An uninitialised DTensor of global `size`."""
    return _make(_creation.empty, size, device_mesh, placements, requires_grad, dtype)


def full(size: Sequence[int], fill_value: Any, *, requires_grad: bool = False, dtype: Any = None,
         layout: Any = None, device_mesh: Optional[DeviceMesh] = None,
         placements: Optional[Sequence[Placement]] = None) -> DTensor:
    """A DTensor of global `size` filled with fill_value."""
    return _make(lambda shape, **kw: _creation.full(shape, fill_value, **kw), (tuple(size),), device_mesh,
                 placements, requires_grad, dtype)


def rand(*size: Any, requires_grad: bool = False, dtype: Any = None, layout: Any = None,
         device_mesh: Optional[DeviceMesh] = None, placements: Optional[Sequence[Placement]] = None) -> DTensor:
    """Uniform [0, 1) values, each rank drawing its own piece from its generator."""
    return _make(_creation.rand, size, device_mesh, placements, requires_grad, dtype)


def randn(*size: Any, requires_grad: bool = False, dtype: Any = None, layout: Any = None,
          device_mesh: Optional[DeviceMesh] = None, placements: Optional[Sequence[Placement]] = None) -> DTensor:
    """Standard normal values, each rank drawing its own piece from its generator."""
    return _make(_creation.randn, size, device_mesh, placements, requires_grad, dtype)
