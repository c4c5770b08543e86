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


def _factory(fn: Any, name: str, doc: str) -> Any:
    def make(*size: Any, requires_grad: bool = False, dtype: Any = None, layout: Any = None,
             device_mesh: Optional[DeviceMesh] = None, placements: Optional[Sequence[Placement]] = None) -> DTensor:
        return _make(fn, size, device_mesh, placements, requires_grad, dtype)
    make.__name__ = make.__qualname__ = name
    make.__doc__ = doc
    return make


ones = _factory(_creation.ones, "ones", "A DTensor of ones of global `size`.")
zeros = _factory(_creation.zeros, "zeros", "A DTensor of zeros of global `size`.")
empty = _factory(_creation.empty, "empty", "An uninitialised DTensor of global `size`.")
rand = _factory(_creation.rand, "rand", "Uniform [0, 1) values, each rank drawing its own piece from its generator.")
randn = _factory(_creation.randn, "randn", "Standard normal values, each rank drawing its own piece from its "
                 "generator.")


def full(size: Sequence[int], fill_value: Any, *, requires_grad: bool = False, dtype: Any = None,
         layout: Any = None, device_mesh: Optional[DeviceMesh] = None,
         placements: Optional[Sequence[Placement]] = None) -> DTensor:
    """A DTensor of global `size` filled with fill_value."""
    return _make(lambda shape, **kw: _creation.full(shape, fill_value, **kw), (tuple(size),), device_mesh,
                 placements, requires_grad, dtype)
